"""Upstream path `streaming.base.shared.scalar`: re-exports."""

from streaming.dataset.coordination.named_memory import SharedScalar

__all__ = ["SharedScalar"]
