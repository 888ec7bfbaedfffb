"""Upstream path `streaming.base.format.json.writer`: re-exports."""

from streaming.format.json.writer import JSONWriter

__all__ = ["JSONWriter"]
