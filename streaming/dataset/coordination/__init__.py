"""Node-local coordination for StreamingDataset: private files plus kernel locks that die with their process.

Replaces upstream's numbered ``/dev/shm`` blocks and never-deleted filelocks.  Everything lives under a per-user
directory (:func:`state_root`); every file is named by a uuid4 or a hash of real paths, so users, datasets,
processes and concurrent runs never collide; liveness is a lock the kernel drops when its holder dies, so
:func:`clean_stale_state` can delete what killed processes left; nothing ever waits for another process to arrive.
"""

from streaming.dataset.coordination.cache_accounting import CacheState
from streaming.dataset.coordination.cleanup import clean_stale_state
from streaming.dataset.coordination.instance import InstanceState
from streaming.dataset.coordination.root import state_root
from streaming.dataset.coordination.shard_locks import ShardLocks

__all__ = ["CacheState", "InstanceState", "ShardLocks", "clean_stale_state", "state_root"]
