"""Upstream path `streaming.base.dataset`: re-exports, and upstream's private `_ShardState` names."""

from enum import IntEnum

from streaming.dataset.dataset import StreamingDataset

__all__ = ["StreamingDataset"]


class _ShardState(IntEnum):
    """Upstream's shard download states, for code that imports them; this package keeps no shard-state array."""

    INVALID = 0
    REMOTE = 1
    PREPARING = 2
    LOCAL = 3
