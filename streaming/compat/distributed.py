"""Rank and world-size helpers (upstream's `streaming.base.distributed`), from the torchrun environment variables.

The dataset itself never needs a process group; these helpers exist for user code that imported them.
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

TObj = TypeVar("TObj")


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


def all_gather_object(obj: TObj) -> list[TObj]:
    """Return the picklable ``obj`` of every rank, indexed by rank.

    Raises:
        RuntimeError: ``WORLD_SIZE`` is above 1 but no process group is initialised.
    """
    world_size = get_world_size()
    if world_size == 1:
        return [obj]  # what a one-rank group gathers too, without importing torch
    if _initialized():
        import torch.distributed as dist

        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, obj)
        return gathered
    raise RuntimeError(
        f"The world_size({world_size}) > 1, but the distributed package is not available or has not been "
        f"initialized: call torch.distributed.init_process_group (or streaming.base.distributed.maybe_init_dist) "
        f"first."
    )


def maybe_init_dist() -> bool:
    """Initialise the default process group from the torchrun variables when there are several ranks.

    Uses NCCL when CUDA is there, else Gloo. Returns whether this call initialised it (``False`` for a single
    rank, or when a group exists already or torch has no distributed support).
    """
    if get_world_size() == 1:
        return False
    import torch
    import torch.distributed as dist

    if not dist.is_available() or dist.is_initialized():
        return False
    backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend=backend, rank=get_rank(), world_size=get_world_size())
    return True
