"""Upstream import path `streaming.base.batching.random`."""

from streaming.dataset.batching import generate_work_random_batching

__all__ = ["generate_work_random_batching"]
