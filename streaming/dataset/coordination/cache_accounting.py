"""Node-wide cache accounting for a set of local dataset directories, shared by every process using them.

One mapped file, ``<root>/cache-<hash>.lock`` (hash of the directories' realpaths and the shard count), laid out as

* 8-byte magic, then int64 header fields (:data:`_HEADER_FIELDS`), padded to 64 bytes;
* ``state``: uint8 per shard (:attr:`CacheState.REMOTE`, :attr:`CacheState.LOCAL`, :attr:`CacheState.PREPARING`),
  padded to 8 bytes;
* ``nbytes``: int64 per shard, bytes on disk accounted for the shard;
* ``reserved``: int64 per shard, bytes reserved by a preparer for a download in progress;
* ``atime``: int64 per shard, last access in ns since the epoch (written without locking).

``usage = index bytes + sum(nbytes) + sum(reserved)``.  Compound updates hold the header lock (POSIX lock on byte
0).  A process preparing shard ``i`` holds the POSIX lock on byte ``1 + i``, so the kernel frees it if the preparer
dies; a 'preparing' entry whose lock is free is re-checked against the filesystem (the ``scan`` callback).  A dirty
flag is set while the header lock is held, so a process killed half-way through an update makes the next one
re-scan.  The first process to open the file (nobody else has it open) re-scans too: the directories may have
changed while nobody was watching.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from streaming.dataset.coordination import lockfile
from streaming.dataset.coordination.root import state_root
from streaming.dataset.coordination.shard_locks import dir_key
from streaming.format.distinct import distinct

_MAGIC = b"MDSCACH1"
_HEADER_FIELDS = ("num_shards", "initialised", "dirty", "usage", "index_bytes", "num_preparing")
_NUM_SHARDS, _INITIALISED, _DIRTY, _USAGE, _INDEX_BYTES, _NUM_PREPARING = range(len(_HEADER_FIELDS))
_HEADER_SIZE = 64
_HEADER_LOCK = 0

Scan = Callable[[], "tuple[np.ndarray, int]"]


def _layout(num_shards: int) -> tuple[int, int, int, int, int]:
    """Offsets of the state, nbytes, reserved and atime arrays, and the file size."""
    states = _HEADER_SIZE
    nbytes = states + (num_shards + 7) // 8 * 8
    reserved = nbytes + 8 * num_shards
    atimes = reserved + 8 * num_shards
    return states, nbytes, reserved, atimes, atimes + 8 * num_shards


class CacheState:
    """Per-shard presence, access times and total bytes in use for a set of local directories.

    ``scan()`` returns the bytes present on disk per shard (int64 array, 0 = absent) and the bytes of the index
    files; it is called when the accounting must be rebuilt from the filesystem.
    """

    REMOTE = 0
    LOCAL = 1
    PREPARING = 2

    def __init__(self, key_dirs: list[str], num_shards: int, scan: Scan) -> None:
        self.key_dirs = list(key_dirs)
        self.num_shards = num_shards
        self.scan = scan
        self._atimes: np.ndarray | None = None
        self._open()

    def __getstate__(self) -> dict[str, Any]:
        return {"key_dirs": self.key_dirs, "num_shards": self.num_shards, "scan": self.scan}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._atimes = None

    # ------------------------------------------------------------------ opening and rebuilding

    def _open(self) -> np.ndarray:
        path = os.path.join(state_root(), f"cache-{dir_key(self.key_dirs, self.num_shards, 'v1')}.lock")
        lock_file, opened_here = lockfile.open_shared(path, create=True)
        weakref.finalize(self, lockfile.close_shared, lock_file)
        states_at, nbytes_at, reserved_at, atimes_at, size = _layout(self.num_shards)
        n = self.num_shards
        lock_file.acquire(_HEADER_LOCK)
        try:
            first = opened_here and lock_file.sole_user()
            self._map = lock_file.mapping(size)
            self._header = np.frombuffer(self._map, np.int64, len(_HEADER_FIELDS), len(_MAGIC))
            self._states = np.frombuffer(self._map, np.uint8, n, states_at)
            self._nbytes = np.frombuffer(self._map, np.int64, n, nbytes_at)
            self._reserved = np.frombuffer(self._map, np.int64, n, reserved_at)
            self._file = lock_file
            atimes = np.frombuffer(self._map, np.int64, n, atimes_at)
            if first or not self._consistent(atimes):
                self._rebuild(atimes, keep_live=not first)
            self._atimes = atimes
        finally:
            lock_file.release(_HEADER_LOCK)
        self._sweep()
        return atimes

    def _ensure(self) -> np.ndarray:
        """The access-time array, opening the file on first use in an unpickled copy."""
        if self._atimes is None:
            return self._open()
        return self._atimes

    def _header_matches(self) -> bool:
        return self._map[: len(_MAGIC)] == _MAGIC and self._header[_NUM_SHARDS] == self.num_shards

    def _consistent(self, atimes: np.ndarray) -> bool:
        header = self._header
        if not self._header_matches() or header[_INITIALISED] != 1 or header[_DIRTY] != 0:
            return False
        states = self._states
        return bool(
            states.max(initial=0) <= self.PREPARING
            and header[_NUM_PREPARING] == np.count_nonzero(states == self.PREPARING)
            and header[_USAGE] == header[_INDEX_BYTES] + self._nbytes.sum() + self._reserved.sum()
            and atimes.min(initial=0) >= 0
        )

    def _scan(self) -> tuple[np.ndarray, int]:
        sizes, index_bytes = self.scan()
        sizes = np.array(sizes, dtype=np.int64).reshape(-1)
        if sizes.shape != (self.num_shards,):
            raise ValueError(
                f"Cache scan of {self.key_dirs} returned sizes for {sizes.size} shards, expected {self.num_shards}."
            )
        return sizes, int(index_bytes)

    def _rebuild(self, atimes: np.ndarray, keep_live: bool) -> None:
        """Recompute everything from ``scan()`` (header lock held); entries of live preparers are kept."""
        keep_times = self._header_matches()
        header, states, nbytes, reserved = self._header, self._states, self._nbytes, self._reserved
        header[_INITIALISED] = 0
        sizes, index_bytes = self._scan()
        # A live preparer's download is still running: its mark and reservation survive the rebuild, and its
        # bytes are counted when it calls mark_present, not now from a half-written file.
        live = np.array(
            [s for s in np.flatnonzero(states == self.PREPARING) if keep_live and self._file.claimed(1 + int(s))],
            np.int64,
        )
        new_states = np.where(sizes > 0, self.LOCAL, self.REMOTE).astype(np.uint8)
        new_states[live] = self.PREPARING
        sizes[live] = nbytes[live]
        kept_reserved = reserved[live].copy()
        reserved[:] = 0
        reserved[live] = kept_reserved
        nbytes[:] = sizes
        states[:] = new_states
        if not keep_times:
            atimes[:] = 0
        self._map[: len(_MAGIC)] = _MAGIC
        header[_NUM_SHARDS] = self.num_shards
        header[_INDEX_BYTES] = index_bytes
        header[_USAGE] = index_bytes + nbytes.sum() + reserved.sum()
        header[_NUM_PREPARING] = live.size
        header[_DIRTY] = 0
        header[_INITIALISED] = 1

    def _sweep(self) -> None:
        """Re-check 'preparing' entries whose preparer died (cheap when this process is the only preparer)."""
        # Every 'preparing' mark is this process's own (the common single-preparer case): none can be dead, and
        # no per-shard lock probe is needed.
        if self._header[_NUM_PREPARING] <= self._file.claims():
            return
        preparing = np.flatnonzero(self._states == self.PREPARING)
        dead = [int(s) for s in preparing if not self._file.claimed(1 + int(s))]
        if dead:
            with self.lock():
                self._repair(dead)

    def _repair(self, shards: list[int]) -> None:
        """Settle abandoned 'preparing' entries from the filesystem (header lock held)."""
        states, nbytes, reserved, header = self._states, self._nbytes, self._reserved, self._header
        dead = [s for s in shards if states[s] == self.PREPARING and not self._file.claimed(1 + s)]
        if not dead:
            return
        sizes, _ = self._scan()
        for s in dead:
            header[_USAGE] += sizes[s] - nbytes[s] - reserved[s]
            nbytes[s] = sizes[s]
            reserved[s] = 0
            states[s] = self.LOCAL if sizes[s] > 0 else self.REMOTE
            header[_NUM_PREPARING] -= 1

    # ------------------------------------------------------------------ public interface

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the header lock (reentrant per thread) for a compound update such as evict-then-reserve."""
        atimes = self._ensure()
        lock_file = self._file
        depth = lock_file.acquire(_HEADER_LOCK)
        marked = False
        try:
            if depth == 1:
                header = self._header
                # DIRTY still set means a process died inside its update: the counts cannot be trusted.
                if header[_DIRTY] or header[_INITIALISED] != 1:
                    self._rebuild(atimes, keep_live=True)
                header[_DIRTY] = 1
                marked = True
            yield
        finally:
            if marked:
                self._header[_DIRTY] = 0
            lock_file.release(_HEADER_LOCK)

    def _check(self, shard_id: int) -> int:
        if not 0 <= shard_id < self.num_shards:
            raise IndexError(
                f"Shard {shard_id} is out of range for the cache of {self.key_dirs}: valid shards are "
                f"0 to {self.num_shards - 1}."
            )
        return shard_id

    def usage(self) -> int:
        """Bytes in use: index files, shards present and space reserved by downloads in progress."""
        self._ensure()
        self._sweep()
        return int(self._header[_USAGE])

    def touch(self, shard_id: int) -> None:
        """Record an access to shard ``shard_id`` now (a plain store, no lock)."""
        atimes = self._atimes if self._atimes is not None else self._ensure()
        # Unlocked on purpose (once per sample read): access times only rank eviction victims, so a lost race
        # costs a slightly different victim, never a wrong byte count.
        atimes[self._check(shard_id)] = time.time_ns()

    def merge_access_times(self, times: np.ndarray) -> None:
        """Keep, per shard, the later of the recorded access time and ``times`` (ns since the epoch, 0 = never)."""
        atimes = self._ensure()
        np.maximum(atimes, np.asarray(times, np.int64).reshape(self.num_shards), out=atimes)

    def is_present(self, shard_id: int) -> bool:
        """Whether shard ``shard_id`` is marked local (an abandoned 'preparing' entry is re-checked first)."""
        self._ensure()
        state = self._states[self._check(shard_id)]
        if state == self.PREPARING and not self._file.claimed(1 + shard_id):
            with self.lock():
                self._repair([shard_id])
            state = self._states[shard_id]
        return bool(state == self.LOCAL)

    def mark_preparing(self, shard_id: int, nbytes: int = 0) -> bool:
        """Mark shard ``shard_id`` as being prepared by this process and reserve ``nbytes`` for it.

        Returns False (changing nothing) if a live process, this one included, is already preparing it.  The mark
        and the reservation end with this process's :meth:`mark_present` or :meth:`mark_absent` of the shard, or
        with its death.
        """
        self._ensure()
        self._check(shard_id)
        with self.lock():
            if not self._file.claim(1 + shard_id):
                return False
            header, reserved = self._header, self._reserved
            if self._states[shard_id] == self.PREPARING:
                header[_USAGE] -= reserved[shard_id]
            else:
                header[_NUM_PREPARING] += 1
            self._states[shard_id] = self.PREPARING
            reserved[shard_id] = nbytes
            header[_USAGE] += nbytes
            return True

    def _finish(self, shard_id: int, new_state: int, delta: int) -> None:
        """End any preparation of the shard, then apply a byte delta and a new state (header lock held)."""
        header, reserved = self._header, self._reserved
        ours = self._file.unclaim(1 + shard_id)
        # The reservation goes with our preparation, or with a dead preparer's; a live other preparer keeps it.
        if reserved[shard_id] and (ours or not self._file.claimed(1 + shard_id)):
            header[_USAGE] -= reserved[shard_id]
            reserved[shard_id] = 0
        if self._states[shard_id] == self.PREPARING:
            header[_NUM_PREPARING] -= 1
        self._nbytes[shard_id] += delta
        header[_USAGE] += delta
        self._states[shard_id] = new_state

    def mark_present(self, shard_id: int, nbytes: int) -> None:
        """Mark shard ``shard_id`` local, add ``nbytes`` to its usage and touch it (ends this process's reservation)."""
        atimes = self._ensure()
        self._check(shard_id)
        with self.lock():
            self._finish(shard_id, self.LOCAL, nbytes)
            atimes[shard_id] = time.time_ns()

    def mark_absent(self, shard_id: int, nbytes: int) -> None:
        """Mark shard ``shard_id`` remote and subtract ``nbytes`` from usage (ends this process's reservation)."""
        self._ensure()
        self._check(shard_id)
        with self.lock():
            self._finish(shard_id, self.REMOTE, -nbytes)

    def mark_gone(self, shard_id: int) -> None:
        """Mark shard ``shard_id`` remote and drop every byte accounted for it: none of its files are left.

        Unlike :meth:`mark_absent` this needs no byte count, so files deleted behind the cache's back (a
        cleaned disk) leave no phantom usage.
        """
        self._ensure()
        self._check(shard_id)
        with self.lock():
            self._finish(shard_id, self.REMOTE, -int(self._nbytes[shard_id]))

    def coldest(self, candidates: np.ndarray) -> list[int]:
        """The shards among ``candidates`` that are marked local, least recently accessed first."""
        atimes = self._ensure()
        shards = distinct(np.asarray(candidates, dtype=np.int64).reshape(-1))
        if shards.size:
            self._check(int(shards[0]))
            self._check(int(shards[-1]))
        present = shards[self._states[shards] == self.LOCAL]
        return present[np.argsort(atimes[present], kind="stable")].tolist()
