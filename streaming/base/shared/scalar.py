"""Upstream path `streaming.base.shared.scalar`: re-exports."""

from streaming.compat.shared_memory import SharedScalar

__all__ = ["SharedScalar"]
