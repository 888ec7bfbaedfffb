"""Upstream path `streaming.base.shared.memory`: re-exports."""

from streaming.dataset.coordination.named_memory import SharedMemory

__all__ = ["SharedMemory"]
