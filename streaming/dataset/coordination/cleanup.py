"""Delete what dead processes left in the state root.

Only names this package creates are considered: ``<kind>-<32 hex>.lock`` files (with an optional
``<kind>-<32 hex>/`` directory next to them) and ``<kind>-<32 hex>.<32 hex>.tmp`` files.  A file goes when no live
process holds any lock on it; a directory goes when its lock file is gone.  Anything in use is left alone, so
this is safe to call at any time from any process.

:func:`remove_upstream_blocks` also removes the POSIX shared-memory blocks MosaicML Streaming leaves in
``/dev/shm`` when its processes die (``<prefix:06>_<name>``), as its ``clean_stale_shared_memory`` does.
"""

from __future__ import annotations

import os
import re
import shutil

from streaming.dataset.coordination.constant import SHM_TO_CLEAN
from streaming.dataset.coordination.lockfile import remove_if_unused
from streaming.dataset.coordination.root import state_root

_FILE = re.compile(r"^(?P<stem>[a-z]+-[0-9a-f]{32})(\.lock|\.[0-9a-f]{32}\.tmp)$")
_DIR = re.compile(r"^[a-z]+-[0-9a-f]{32}$")


def clean_stale_state() -> int:
    """Remove leftovers of dead processes under :func:`state_root`; returns how many entries were removed."""
    root = state_root()
    removed = 0
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        match = _FILE.match(name)
        if match is not None:
            companion = os.path.join(root, match["stem"]) if name.endswith(".lock") else None
            had_companion = companion is not None and os.path.isdir(companion)
            if remove_if_unused(path, companion):
                removed += 1 + had_companion
        elif _DIR.match(name) and not os.path.exists(path + ".lock") and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
            removed += not os.path.exists(path)
    return removed


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
