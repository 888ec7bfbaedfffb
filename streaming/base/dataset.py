"""Upstream path `streaming.base.dataset`: re-exports, and upstream's private `_ShardState` name."""

from streaming.compat.coordination_names import ShardState as _ShardState
from streaming.dataset.dataset import StreamingDataset

__all__ = ["StreamingDataset", "_ShardState"]
