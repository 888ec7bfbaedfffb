"""Per-dataset-instance state shared by the owning process and its DataLoader workers.

Files (``<root>`` is :func:`state_root`):

* ``<root>/inst-<uuid4>.lock``: the state file, and the liveness lock (every user holds a shared flock on it).
  Layout, little-endian: 8-byte magic, then at :data:`_SLOTS` one int64 iteration counter per worker, then at
  :data:`_RESUME` the resume generation (int64), the blob length (int64) and up to 64 KiB of JSON text;
* ``<root>/inst-<uuid4>/``: scratch files shared by the workers (:meth:`InstanceState.shared_file`), with their
  build locks ``.<key>.lock`` and temporary files ``.<key>.<uuid>.tmp``.

Counters and the resume blob are guarded by POSIX byte-range locks on the state file (offset ``w`` for worker
``w``'s counter, :data:`MAX_WORKERS` for the resume blob), so updates are atomic across processes and threads.
Nothing waits for another process to arrive: a caller only ever waits for a lock whose holder is working.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import re
import shutil
import struct
import uuid
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from streaming.dataset.coordination import lockfile
from streaming.dataset.coordination.cleanup import clean_stale_state
from streaming.dataset.coordination.root import state_root

MAX_WORKERS = 1024
MAX_RESUME_BYTES = 64 * 1024

_MAGIC = b"MDSINST1"
_SLOTS = 64
_RESUME = _SLOTS + 8 * MAX_WORKERS
_RESUME_DATA = _RESUME + 16
_FILE_SIZE = _RESUME_DATA + MAX_RESUME_BYTES
_RESUME_LOCK = MAX_WORKERS
_INT64 = struct.Struct("<q")
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=+-]{0,199}$")
_swept_roots: set[str] = set()


def _close_instance(lock_file: lockfile.LockFile, path: str | None, owner_pid: int) -> None:
    """Finaliser: the owner deletes the instance's files; every process drops its use of the lock file (whose last
    use unmaps it)."""
    if path is not None and os.getpid() != owner_pid:
        return
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
    lockfile.close_shared(lock_file, unlink=path is not None)


class InstanceState:
    """Per-dataset-instance shared state: iteration counters, a resume blob and shared scratch files.

    Created in the process that constructs the dataset (the owner, which deletes everything on :meth:`close`,
    at garbage collection or at exit); pickled copies attach to it in workers, and forked copies keep using it.
    """

    path: str

    def __init__(self) -> None:
        root = state_root()
        if root not in _swept_roots:  # once per process: what killed processes left (SIGKILL runs no finaliser)
            _swept_roots.add(root)
            clean_stale_state()
        lock_file = lockfile.create_unique(root, "inst")
        try:
            state_map = lock_file.mapping(_FILE_SIZE)
            state_map[: len(_MAGIC)] = _MAGIC
            self.path = lock_file.path[: -len(".lock")]
            os.mkdir(self.path, 0o700)
        except BaseException:
            lockfile.close_shared(lock_file, unlink=True)
            raise
        self._file: lockfile.LockFile | None = lock_file
        self._map: mmap.mmap | None = state_map
        self._owner_pid: int | None = os.getpid()
        # The finaliser, not __del__, closes the state: it runs at exit too, and holds no reference to self.
        self._finalizer: weakref.finalize | None = weakref.finalize(
            self, _close_instance, lock_file, self.path, self._owner_pid
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._file = None
        self._map = None
        self._owner_pid = None
        self._finalizer = None

    def _state(self) -> tuple[lockfile.LockFile, mmap.mmap]:
        """The lock file and the mapped state, attaching on first use in an unpickled copy."""
        if self._file is None or self._map is None:
            try:
                lock_file, _ = lockfile.open_shared(self.path + ".lock", create=False)
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"Instance state {self.path} is gone: the process that created the dataset closed it or exited."
                ) from None
            state_map = lock_file.mapping(_FILE_SIZE)
            if state_map[: len(_MAGIC)] != _MAGIC:
                lockfile.close_shared(lock_file)
                raise RuntimeError(f"Instance state file {self.path}.lock is not a valid state file.")
            self._file, self._map = lock_file, state_map
            # path None: a copy only unmaps and drops its shared lock; the owner alone deletes the files.
            self._finalizer = weakref.finalize(self, _close_instance, lock_file, None, 0)
            return lock_file, state_map
        return self._file, self._map

    @staticmethod
    def _check_worker(worker: int) -> int:
        if not 0 <= worker < MAX_WORKERS:
            raise ValueError(f"Worker index {worker} is out of range: valid workers are 0 to {MAX_WORKERS - 1}.")
        return _SLOTS + 8 * worker

    def next_iteration(self, worker: int) -> int:
        """Return worker ``worker``'s iteration count and increment it, atomically."""
        at = self._check_worker(worker)
        lock_file, state_map = self._state()
        lock_file.acquire(worker)
        try:
            (count,) = _INT64.unpack_from(state_map, at)
            _INT64.pack_into(state_map, at, count + 1)
        finally:
            lock_file.release(worker)
        return count

    def iterations(self) -> list[int]:
        """A snapshot of every worker's iteration count."""
        _, state_map = self._state()
        return np.frombuffer(state_map, np.int64, MAX_WORKERS, _SLOTS).tolist()

    def set_iterations(self, worker: int, value: int) -> None:
        """Set worker ``worker``'s iteration count."""
        at = self._check_worker(worker)
        lock_file, state_map = self._state()
        lock_file.acquire(worker)
        try:
            _INT64.pack_into(state_map, at, value)
        finally:
            lock_file.release(worker)

    def write_resume(self, obj: dict) -> int:
        """Store ``obj`` as JSON (sorted keys) for the workers to resume from; returns the new generation."""
        data = json.dumps(obj, sort_keys=True).encode("utf-8")
        if len(data) > MAX_RESUME_BYTES:
            raise ValueError(
                f"Resume state is {len(data)} bytes of JSON, more than the {MAX_RESUME_BYTES}-byte "
                f"limit (instance {self.path})."
            )
        lock_file, state_map = self._state()
        lock_file.acquire(_RESUME_LOCK)
        try:
            (generation,) = _INT64.unpack_from(state_map, _RESUME)
            state_map[_RESUME_DATA : _RESUME_DATA + len(data)] = data
            _INT64.pack_into(state_map, _RESUME + 8, len(data))
            _INT64.pack_into(state_map, _RESUME, generation + 1)
        finally:
            lock_file.release(_RESUME_LOCK)
        return generation + 1

    def read_resume(self) -> tuple[int, dict | None]:
        """The latest resume blob and its generation; ``(0, None)`` if none was written."""
        lock_file, state_map = self._state()
        lock_file.acquire(_RESUME_LOCK)
        try:
            (generation,) = _INT64.unpack_from(state_map, _RESUME)
            (length,) = _INT64.unpack_from(state_map, _RESUME + 8)
            data = state_map[_RESUME_DATA : _RESUME_DATA + length]
        finally:
            lock_file.release(_RESUME_LOCK)
        return generation, (json.loads(data) if generation else None)

    def shared_file(self, key: str, build: Callable[[str], None]) -> str:
        """Path of the shared file ``key``, built once by whichever caller gets there first.

        If the file does not exist, the caller takes the key's exclusive lock (other callers wait for it), calls
        ``build(tmp_path)`` and renames the result into place.  If a builder dies, the next caller builds it.
        """
        if not _KEY.match(key):
            raise ValueError(
                f"Invalid shared file key {key!r}: use 1-200 letters, digits and '._=+-', not starting with a dot."
            )
        path = os.path.join(self.path, key)
        if os.path.exists(path):
            return path
        try:
            fd = os.open(
                os.path.join(self.path, f".{key}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
            )
        except FileNotFoundError:
            raise FileNotFoundError(
                f"Instance state {self.path} is gone: the process that created the dataset closed it or exited."
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not os.path.exists(path):
                self._build(key, path, build)
        finally:
            os.close(fd)
        return path

    def _build(self, key: str, path: str, build: Callable[[str], None]) -> None:
        tmp_path = os.path.join(self.path, f".{key}.{uuid.uuid4().hex}.tmp")
        try:
            build(tmp_path)
            if not os.path.exists(tmp_path):
                raise RuntimeError(f"Builder of shared file {key!r} returned without writing {tmp_path}.")
            os.replace(tmp_path, path)
        finally:
            if os.path.exists(tmp_path):
                os.unlink(tmp_path)

    def close(self) -> None:
        """Owner: delete the instance's files now.  Copies in other processes: nothing to do."""
        if self._owner_pid == os.getpid() and self._finalizer is not None:
            self._finalizer()
            self._file = self._map = None
