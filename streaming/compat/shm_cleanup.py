"""Upstream's `clean_stale_shared_memory`: remove what dead processes left, upstream's /dev/shm blocks included.

Upstream names its per-dataset blocks ``/dev/shm/<prefix:06>_<name>`` and leaves them when its processes die;
its ``clean_stale_shared_memory`` removes them. This package never creates them (see
`streaming.dataset.coordination`), but a machine that ran the reference may hold some, so
`clean_stale_shared_memory` removes them (`remove_upstream_blocks`) after this package's own leftovers.
"""

from __future__ import annotations

import os

from streaming.compat.coordination_names import SHM_TO_CLEAN
from streaming.dataset.coordination import clean_stale_state

_POSIX_SHM_DIR = "/dev/shm"


def remove_upstream_blocks() -> int:
    """Unlink upstream's named blocks of prefixes 0, 1, ... up to the first prefix that has none; returns how many.

    Like upstream, this does not check whether a live process still uses them: call it once, before any dataset.
    """
    if not os.path.isdir(_POSIX_SHM_DIR):
        return 0
    removed = 0
    prefix_int = 0
    while True:
        found = 0
        for name in SHM_TO_CLEAN:
            try:
                os.unlink(os.path.join(_POSIX_SHM_DIR, f"{prefix_int:06}_{name}"))
            except FileNotFoundError:
                continue
            except PermissionError:  # another user's block: theirs to clean
                found += 1
                continue
            found += 1
            removed += 1
        if not found:
            return removed
        prefix_int += 1


def clean_stale_shared_memory() -> None:
    """Remove what dead processes left: this package's lock-guarded files, and upstream's /dev/shm blocks."""
    clean_stale_state()
    remove_upstream_blocks()
