"""Upstream path `streaming.base.format.json.reader`: re-exports."""

from streaming.format.json.reader import JSONReader

__all__ = ["JSONReader"]
