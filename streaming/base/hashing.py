"""Upstream path `streaming.base.hashing`: re-exports."""

from streaming.format.hashing import get_hash, get_hashes, is_hash

__all__ = ["get_hash", "get_hashes", "is_hash"]
