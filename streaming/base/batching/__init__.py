"""Upstream import path `streaming.base.batching`."""

from streaming.dataset.batching import batching_methods, generate_work

__all__ = ["batching_methods", "generate_work"]
