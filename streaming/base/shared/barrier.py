"""Upstream path `streaming.base.shared.barrier`: re-exports."""

from streaming.dataset.coordination.barrier import SharedBarrier

__all__ = ["SharedBarrier"]
