"""Upstream import path `streaming.base.shuffle.py2s`."""

from streaming.dataset.shuffle import get_shuffle_py2s

__all__ = ["get_shuffle_py2s"]
