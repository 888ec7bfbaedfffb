"""Upstream import path `streaming.base.shared`.

The named blocks are kept (as per-user, lock-guarded files); the barrier and the numbered-prefix search are gone:
StreamingDataset coordinates through `streaming.dataset.coordination`, where nothing waits for other processes
to arrive and no name is ever guessed.
"""

from __future__ import annotations

from typing import Any, NoReturn

from streaming.dataset.coordination import clean_stale_state, state_root
from streaming.dataset.coordination.named_memory import SharedArray, SharedMemory, SharedScalar

__all__ = [
    "SharedArray",
    "SharedBarrier",
    "SharedMemory",
    "SharedScalar",
    "clean_stale_state",
    "get_shm_prefix",
    "state_root",
]

_REMOVED = (
    "is not provided by mds-streaming: StreamingDataset no longer uses process barriers or numbered "
    "/dev/shm prefixes (see streaming.dataset.coordination: InstanceState, ShardLocks, CacheState)."
)


class SharedBarrier:
    """Upstream's shared-memory barrier; not provided (constructing one raises ``NotImplementedError``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"SharedBarrier {_REMOVED}")


def get_shm_prefix(*args: Any, **kwargs: Any) -> NoReturn:
    """Upstream's shared-memory prefix search; not provided (calling it raises ``NotImplementedError``)."""
    raise NotImplementedError(f"get_shm_prefix {_REMOVED}")
