"""Upstream path `streaming.base.shared.array`: re-exports."""

from streaming.compat.shared_memory import SharedArray

__all__ = ["SharedArray"]
