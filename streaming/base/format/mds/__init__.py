"""Upstream path `streaming.base.format.mds`: re-exports."""

from streaming.format.mds.reader import MDSReader
from streaming.format.mds.writer import MDSWriter

__all__ = ["MDSReader", "MDSWriter"]
