"""Upstream path `streaming.base.stream`: re-exports."""

from streaming.dataset.registry import streams_registry
from streaming.dataset.stream import Stream

__all__ = ["Stream", "streams_registry"]
