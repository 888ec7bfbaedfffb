"""Upstream's named shared-memory blocks (``streaming.base.shared``), kept as lock-guarded files.

A block named ``name`` is the file ``<root>/shm-<hash of name>.lock``, mapped into every process that uses it.
Blocks are per user (other users' blocks cannot collide or cause permission errors), are published fully sized
(built under a temporary name, then hard-linked into place, so an attacher never sees a half-made block), and
each user holds a shared flock on it, so a block whose creator was killed is deleted by ``clean_stale_state``
or taken over by the next creator instead of raising ``FileExistsError`` forever.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import mmap
import os
import uuid
from typing import Any

import numpy as np

from streaming.dataset.coordination import lockfile
from streaming.dataset.coordination.root import state_root


def _block_stem(name: str) -> str:
    if not name or "\0" in name:
        raise ValueError(f"Invalid shared memory name {name!r}: use a non-empty string without NUL characters.")
    return "shm-" + hashlib.sha256(name.lstrip("/").encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _create(root: str, stem: str, size: int) -> int | None:
    """Publish a new zero-filled block of ``size`` bytes; its descriptor, or None if the name is taken."""
    while True:
        tmp_path = os.path.join(root, f"{stem}.{uuid.uuid4().hex}.tmp")
        fd = lockfile.open_and_share(tmp_path, os.O_CREAT | os.O_EXCL)
        if fd is not None:
            break
    try:
        os.ftruncate(fd, size)
        os.link(tmp_path, os.path.join(root, f"{stem}.lock"))
    except FileExistsError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.unlink(tmp_path)
    return fd


def _attach(path: str) -> int | None:
    try:
        return lockfile.open_and_share(path, 0)
    except FileNotFoundError:
        return None


class SharedMemory:
    """A named block of memory shared by the processes of one user on this machine.

    ``create=True`` makes a new block (``FileExistsError`` if a live one has the name), ``create=False`` attaches
    (``FileNotFoundError`` if there is none), ``create=None`` does whichever applies.  The creator deletes the
    block in :meth:`cleanup` (run at exit when ``auto_cleanup``); attachers only unmap it.
    """

    def __init__(
        self, name: str | None = None, create: bool | None = None, size: int = 0, auto_cleanup: bool = True
    ) -> None:
        if name is None:
            if create is False:
                raise ValueError("A shared memory name is required to attach (create=False).")
            name, create = f"mds_{uuid.uuid4().hex}", True
        if create is not False and size <= 0:
            raise ValueError(f"Shared memory {name!r}: size must be a positive number of bytes to create, got {size}.")
        root, stem = state_root(), _block_stem(name)
        self.name = name
        self._path = os.path.join(root, f"{stem}.lock")
        self._pid = os.getpid()
        while True:
            if create is not False:
                fd = _create(root, stem, size)
                if fd is not None:
                    self._created = True
                    break
                if create:
                    if lockfile.remove_if_unused(self._path):
                        continue
                    raise FileExistsError(errno.EEXIST, f"Shared memory {name!r} already exists", name)
            fd = _attach(self._path)
            if fd is not None:
                self._created = False
                break
            if create is False:
                raise FileNotFoundError(errno.ENOENT, f"No shared memory named {name!r}", name)
        self._fd = fd
        self.size = os.fstat(fd).st_size
        self._map: mmap.mmap | None = mmap.mmap(fd, self.size)
        self._buf = memoryview(self._map)
        if auto_cleanup:
            atexit.register(self.cleanup)

    @property
    def buf(self) -> memoryview:
        """The block's bytes, writable and shared with every process that has it open."""
        return self._buf

    @property
    def created(self) -> bool:
        """Whether this object made the block (rather than attached to an existing one)."""
        return self._created

    def __reduce__(self) -> tuple[Any, ...]:
        return SharedMemory, (self.name, False)

    def fix_register(self, name: str, rtype: str) -> Any:
        """Upstream's guard against Python's resource tracker; nothing to guard here, so it does nothing.

        Blocks are lock-guarded files, never ``multiprocessing`` segments: the resource tracker never registers
        them, so it can neither unlink a block early nor warn about a "leaked" one.
        """
        return None

    def fix_unregister(self, name: str, rtype: str) -> Any:
        """Upstream's counterpart of :meth:`fix_register`; likewise nothing to undo."""
        return None

    def cleanup(self) -> None:
        """Unmap the block; its creating process also deletes it."""
        if self._map is None:
            return
        if self._created and os.getpid() == self._pid and lockfile.same_file(self._fd, self._path):
            os.unlink(self._path)
        self._buf.release()
        try:
            self._map.close()
        except BufferError:
            pass  # numpy views of the block are still alive; the mapping goes away with them.
        os.close(self._fd)
        self._map = None


class SharedArray:
    """A numpy array of fixed shape and dtype in a named :class:`SharedMemory` block (created or attached)."""

    def __init__(self, shape: int | tuple[int, ...], dtype: type, name: str) -> None:
        self.shape = np.empty(shape, dtype=np.uint8).shape
        self.dtype = dtype
        self.name = name
        nbytes = int(np.prod(self.shape)) * np.dtype(dtype).itemsize
        self.shm = SharedMemory(name=name, size=max(nbytes, 1))

    def numpy(self) -> np.ndarray:
        """The array itself, backed by the shared block."""
        return np.ndarray(self.shape, dtype=self.dtype, buffer=self.shm.buf)

    def __len__(self) -> int:
        return int(self.shape[0])

    def __getitem__(self, index: Any) -> Any:
        return self.numpy()[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self.numpy()[index] = value


class SharedScalar:
    """One value of a fixed dtype in a named :class:`SharedMemory` block."""

    def __init__(self, dtype: type, name: str) -> None:
        self.dtype = dtype
        self.name = name
        self.arr = SharedArray(1, dtype, name)

    def get(self) -> Any:
        return self.arr[0]

    def set(self, value: Any) -> None:
        self.arr[0] = value
