"""Upstream path `streaming.base.shared.array`: re-exports."""

from streaming.dataset.coordination.named_memory import SharedArray

__all__ = ["SharedArray"]
