"""Upstream path `streaming.base.constant`: re-exports."""

from streaming.compat.coordination_names import (
    BARRIER,
    BARRIER_FILELOCK,
    CACHE_FILELOCK,
    CACHE_USAGE,
    DEFAULT_TIMEOUT,
    EPOCH_DATA,
    EPOCH_SHAPE,
    LOCALS,
    NEXT_EPOCH,
    RESUME,
    SHARD_ACCESS_TIMES,
    SHARD_STATES,
    SHM_TO_CLEAN,
    TICK,
)

__all__ = [
    "BARRIER",
    "BARRIER_FILELOCK",
    "CACHE_FILELOCK",
    "CACHE_USAGE",
    "DEFAULT_TIMEOUT",
    "EPOCH_DATA",
    "EPOCH_SHAPE",
    "LOCALS",
    "NEXT_EPOCH",
    "RESUME",
    "SHARD_ACCESS_TIMES",
    "SHARD_STATES",
    "SHM_TO_CLEAN",
    "TICK",
]
