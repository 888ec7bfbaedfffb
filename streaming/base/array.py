"""Upstream path `streaming.base.array`: re-exports."""

from streaming.dataset.array import Array

__all__ = ["Array"]
