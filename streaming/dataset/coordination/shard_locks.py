"""Exclusive per-shard locks for one local dataset directory, across the processes and threads of a node.

One lock file per directory, ``<root>/shards-<hash>.lock`` (hash of the directory's realpath), so every process
using the directory finds the same file whatever path it was given.  Shard ``i`` is the POSIX byte-range lock at
offset ``i``; the kernel releases it when its holder dies, so a killed downloader never blocks anyone.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from typing import Any

from streaming.dataset.coordination import lockfile
from streaming.dataset.coordination.root import state_root


def dir_key(dirs: list[str], *extra: object) -> str:
    """A 32-hex-digit key naming a list of directories by their real paths (plus any ``extra`` parts)."""
    parts = [os.path.realpath(d) for d in dirs] + [str(e) for e in extra]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


class _Hold:
    """Context manager holding one shard lock; yields whether it was acquired (always True when blocking)."""

    __slots__ = ("_locks", "_file", "_shard", "_blocking", "_held")

    def __init__(self, locks: ShardLocks, lock_file: lockfile.LockFile, shard: int, blocking: bool) -> None:
        # Keeping ``locks`` alive keeps its use of the lock file (released when it is collected) while held.
        self._locks, self._file, self._shard, self._blocking, self._held = locks, lock_file, shard, blocking, False

    def __enter__(self) -> bool | None:
        self._held = self._file.acquire(self._shard, self._blocking) > 0
        return None if self._blocking else self._held

    def __exit__(self, *exc: object) -> None:
        if self._held:
            self._held = False
            self._file.release(self._shard)


class ShardLocks:
    """Exclusive per-shard locks for one local dataset directory (download, decompress, evict).

    A thread may take a shard it already holds again (the hold nests); other threads and processes wait.
    """

    def __init__(self, local_dir: str, num_shards: int) -> None:
        self.local_dir = local_dir
        self.num_shards = num_shards
        self._file: lockfile.LockFile | None = None
        self._open()

    def _open(self) -> lockfile.LockFile:
        path = os.path.join(state_root(), f"shards-{dir_key([self.local_dir])}.lock")
        lock_file, _ = lockfile.open_shared(path, create=True)
        self._file = lock_file
        weakref.finalize(self, lockfile.close_shared, lock_file)
        return lock_file

    def __getstate__(self) -> dict[str, Any]:
        return {"local_dir": self.local_dir, "num_shards": self.num_shards}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.local_dir = state["local_dir"]
        self.num_shards = state["num_shards"]
        self._file = None

    def _lock_for(self, shard_id: int) -> lockfile.LockFile:
        if not 0 <= shard_id < self.num_shards:
            raise IndexError(
                f"Shard {shard_id} is out of range for {self.local_dir}: valid shards are 0 to {self.num_shards - 1}."
            )
        return self._file or self._open()

    def hold(self, shard_id: int) -> _Hold:
        """Hold shard ``shard_id``'s lock for the ``with`` block, waiting for the current holder if any."""
        return _Hold(self, self._lock_for(shard_id), shard_id, blocking=True)

    def try_hold(self, shard_id: int) -> _Hold:
        """Take shard ``shard_id``'s lock if it is free; the ``with`` block receives whether it was taken."""
        return _Hold(self, self._lock_for(shard_id), shard_id, blocking=False)
