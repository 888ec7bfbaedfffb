"""Upstream import path `streaming.base.shuffle.py1e`."""

from streaming.dataset.shuffle import get_shuffle_py1e

__all__ = ["get_shuffle_py1e"]
