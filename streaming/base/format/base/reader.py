"""Upstream path `streaming.base.format.base.reader`: re-exports."""

from streaming.format.index import FileInfo
from streaming.format.reader import JointReader, Reader, SplitReader

__all__ = ["FileInfo", "JointReader", "Reader", "SplitReader"]
