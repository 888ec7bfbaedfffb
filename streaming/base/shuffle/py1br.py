"""Upstream import path `streaming.base.shuffle.py1br`."""

from streaming.dataset.shuffle import get_shuffle_py1br

__all__ = ["get_shuffle_py1br"]
