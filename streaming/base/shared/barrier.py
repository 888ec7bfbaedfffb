"""Upstream path `streaming.base.shared.barrier`: re-exports."""

from streaming.compat.shared_barrier import SharedBarrier

__all__ = ["SharedBarrier"]
