"""Upstream path `streaming.base.format.json`: re-exports."""

from streaming.format.json.reader import JSONReader
from streaming.format.json.writer import JSONWriter

__all__ = ["JSONReader", "JSONWriter"]
