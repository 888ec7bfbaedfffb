"""Upstream path `streaming.base.distributed`: re-exports."""

from streaming.dataset.distributed import (
    all_gather,
    all_gather_object,
    barrier,
    broadcast,
    get_local_rank,
    get_local_world_size,
    get_rank,
    get_world_size,
)

__all__ = [
    "all_gather",
    "all_gather_object",
    "barrier",
    "broadcast",
    "get_local_rank",
    "get_local_world_size",
    "get_rank",
    "get_world_size",
]
