"""Upstream path `streaming.base.distributed`: re-exports."""

from streaming.compat.distributed import (
    TObj,
    all_gather,
    all_gather_object,
    barrier,
    broadcast,
    get_local_rank,
    get_local_world_size,
    get_rank,
    get_world_size,
    maybe_init_dist,
)

__all__ = [
    "TObj",
    "all_gather",
    "all_gather_object",
    "barrier",
    "broadcast",
    "get_local_rank",
    "get_local_world_size",
    "get_rank",
    "get_world_size",
    "maybe_init_dist",
]
