"""Upstream's coordination names (`streaming.base.constant`): block names, lock names, timing, shard states.

`SharedBarrier` and `get_shm_prefix` (upstream's API, kept for user code) name their blocks with these; the
dataset itself coordinates through the per-user lock files of this package and uses none of them.
"""

from enum import IntEnum

LOCALS = "locals"
BARRIER = "barrier"
NEXT_EPOCH = "next_epoch"
CACHE_USAGE = "cache_usage"
SHARD_STATES = "shard_states"
SHARD_ACCESS_TIMES = "shard_access_times"
RESUME = "resume"
EPOCH_SHAPE = "epoch_shape"
EPOCH_DATA = "epoch_data"

#: Every per-dataset block name, each prefixed ``<prefix int:06>_`` by `get_shm_prefix`.
SHM_TO_CLEAN = [
    LOCALS,
    BARRIER,
    NEXT_EPOCH,
    CACHE_USAGE,
    SHARD_STATES,
    SHARD_ACCESS_TIMES,
    RESUME,
    EPOCH_SHAPE,
    EPOCH_DATA,
]

BARRIER_FILELOCK = "barrier_filelock"
CACHE_FILELOCK = "cache_filelock"

#: Seconds between two polls of shared state.
TICK = 0.007

#: Seconds to wait for a file another process is producing.
DEFAULT_TIMEOUT = 60.0


class ShardState(IntEnum):
    """Upstream's shard download states (``streaming.base.dataset._ShardState``), for code that imports them;
    this package keeps no shard-state array (`streaming.dataset.coordination.cache_accounting` has its own)."""

    INVALID = 0
    REMOTE = 1
    PREPARING = 2
    LOCAL = 3
