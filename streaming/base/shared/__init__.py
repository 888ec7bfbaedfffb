"""Upstream import path `streaming.base.shared`: named shared blocks, a barrier and the prefix search.

They are built on this package's coordination layer (per-user lock-guarded files that the kernel frees when
their users die); StreamingDataset itself coordinates through `streaming.dataset.coordination` and uses none
of them, so these exist for user code written against upstream.
"""

from streaming.compat.shared_barrier import SharedBarrier
from streaming.compat.shared_memory import SharedArray, SharedMemory, SharedScalar
from streaming.compat.shm_prefix import get_shm_prefix
from streaming.dataset.coordination import clean_stale_state, state_root

__all__ = [
    "SharedArray",
    "SharedBarrier",
    "SharedMemory",
    "SharedScalar",
    "clean_stale_state",
    "get_shm_prefix",
    "state_root",
]
