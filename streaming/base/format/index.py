"""Upstream path `streaming.base.format.index`: re-exports."""

from streaming.format.index import get_index_basename

__all__ = ["get_index_basename"]
