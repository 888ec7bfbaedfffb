"""Upstream path `streaming.base.shared.memory`: re-exports."""

from streaming.compat.shared_memory import SharedMemory

__all__ = ["SharedMemory"]
