"""Upstream path `streaming.base.shared.prefix`: re-exports."""

from streaming.dataset.coordination.prefix import get_shm_prefix

__all__ = ["get_shm_prefix"]
