"""Delete what dead processes left in the state root.

Only names this package creates are considered: ``<kind>-<32 hex>.lock`` files (with an optional
``<kind>-<32 hex>/`` directory next to them) and ``<kind>-<32 hex>.<32 hex>.tmp`` files.  A file goes when no live
process holds any lock on it; a directory goes when its lock file is gone.  Anything in use is left alone, so
this is safe to call at any time from any process.
"""

from __future__ import annotations

import os
import re
import shutil

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
