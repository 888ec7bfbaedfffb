"""Upstream import path `streaming.base.batching.per_stream`."""

from streaming.dataset.batching import generate_work_per_stream_batching

__all__ = ["generate_work_per_stream_batching"]
