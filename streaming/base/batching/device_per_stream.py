"""Upstream import path `streaming.base.batching.device_per_stream`."""

from streaming.dataset.batching import generate_work_device_per_stream_batching

__all__ = ["generate_work_device_per_stream_batching"]
