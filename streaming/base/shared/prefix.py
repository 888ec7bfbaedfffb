"""Upstream path `streaming.base.shared.prefix`: re-exports."""

# Upstream's private name for a numbered block's name, which code that cleans stale blocks by hand imports.
from streaming.compat.shm_prefix import _block_name as _get_path  # noqa: F401
from streaming.compat.shm_prefix import get_shm_prefix

__all__ = ["get_shm_prefix"]
