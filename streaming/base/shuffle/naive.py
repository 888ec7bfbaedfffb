"""Upstream import path `streaming.base.shuffle.naive`."""

from streaming.dataset.shuffle import get_shuffle_naive

__all__ = ["get_shuffle_naive"]
