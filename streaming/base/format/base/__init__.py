"""Upstream path `streaming.base.format.base`: the shard reader base classes."""

from streaming.format.index import FileInfo
from streaming.format.reader import Reader

__all__ = ["FileInfo", "Reader"]
