"""Rank and world-size helpers (upstream's `streaming.base.distributed`), from the torchrun environment variables.

The dataset itself never needs a process group; these helpers exist for user code that imported them.
"""

from __future__ import annotations

import os
from typing import Any


def _env(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


def get_rank() -> int:
    """Global rank (``RANK``, default 0)."""
    return _env("RANK", 0)


def get_world_size() -> int:
    """Number of ranks (``WORLD_SIZE``, default 1)."""
    return _env("WORLD_SIZE", 1)


def get_local_rank() -> int:
    """Rank within the node (``LOCAL_RANK``, default 0)."""
    return _env("LOCAL_RANK", 0)


def get_local_world_size() -> int:
    """Ranks per node (``LOCAL_WORLD_SIZE``, default 1)."""
    return _env("LOCAL_WORLD_SIZE", 1)


def _initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def barrier() -> None:
    """Wait for every rank, when a process group is initialised (otherwise return at once)."""
    if _initialized():
        import torch.distributed as dist

        dist.barrier()


def broadcast(tensor: Any, src: int) -> None:
    """Broadcast ``tensor`` from rank ``src``, when a process group is initialised."""
    if _initialized():
        import torch.distributed as dist

        dist.broadcast(tensor, src)


def all_gather(tensor_list: list[Any], tensor: Any) -> None:
    """Gather ``tensor`` from every rank into ``tensor_list``, when a process group is initialised."""
    if _initialized():
        import torch.distributed as dist

        dist.all_gather(tensor_list, tensor)
    else:
        tensor_list[0] = tensor


def all_gather_object(objects: list[Any], obj: Any) -> None:
    """Gather a picklable object from every rank, when a process group is initialised."""
    if _initialized():
        import torch.distributed as dist

        dist.all_gather_object(objects, obj)
    else:
        objects[0] = obj
