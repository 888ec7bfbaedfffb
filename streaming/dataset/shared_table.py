"""A stream's shard table decoded once per node and mapped by every other process of it.

Every rank of a node reads the same ``index.json``; decoding it costs each of them time and memory in proportion
to the whole index (a million shards: ~3 s and ~0.75 GB at the peak here), whatever share of the shards the rank
reads. So the first process to load a large index writes its decoded `ShardTable` (`streaming.format.mapped_table`)
to ``<state root>/table-<key>/table.bin``; the other ranks, and DataLoader workers started by ``spawn`` or
``forkserver`` (which unpickle the dataset), map that file: a few system calls, and in memory only the pages
they read (the per-shard sample counts every plan needs, and the records of the shards they open).

The key is a digest of the index file's path and identity (device, inode, size, modification and change
times), so a replaced or rewritten index is decoded again. The state root is this user's private folder
(`state_root`); the table is written there under a build lock, then renamed into place, so no process ever maps
half a file. Everything below the root is reached through descriptors without following a link: the root's,
checked to be this user's and writable by no one else, then the table's folder, checked the same way, then the
file, which is mapped only when it is this user's regular file, no one else may write it, its size is what its
header states and its header names the same index (`streaming.format.mapped_table`). A build deletes and writes
only inside the table's own folder. Every process that maps it holds a shared lock on ``table-<key>.lock`` for as
long as it uses the table; the last one to let go removes the pair, and the state root's cleanup removes what
killed processes left, so tables never pile up between jobs.

Indexes under `SHARE_FROM_BYTES` are decoded directly: a few thousand shards decode faster than a file is made.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import uuid
import weakref
from typing import Any, NamedTuple

from streaming.dataset.coordination.lockfile import LockFile, close_shared, open_shared, remove_if_unused
from streaming.dataset.coordination.root import private_folder, state_root
from streaming.format.index import MAX_INDEX_BYTES
from streaming.format.mapped_table import TableFileError, map_table, write_table
from streaming.format.table import ShardTable
from streaming.storage.local_tree import LocalTree, read_at_most

logger = logging.getLogger(__name__)

#: Indexes of at least this many bytes (about 3,500 shards) are shared; smaller ones are decoded in place.
SHARE_FROM_BYTES = 1 << 20
_TABLE_FILE = "table.bin"
#: Offset of the build lock in ``table-<key>.lock`` (its shared flock is the liveness lock).
_BUILD_LOCK = 0


class SharedShardTable(ShardTable):
    """A `ShardTable` over a node's shared table file; it pickles as the way to map that file again, so a
    spawned worker maps the table instead of receiving a copy of it."""

    reopen: tuple[str, str, str]

    def __reduce__(self) -> tuple[Any, tuple[str, str, str]]:
        return _map_again, self.reopen


def load_table(path: str, root: str) -> ShardTable:
    """The shard table of the index at ``path``, reached from ``root`` without following a link below it.

    A large index is shared node-wide (see the module's docstring); if the state root cannot hold it (no space,
    a read-only folder), the index is decoded in this process alone.
    """
    fd, info = _open_index(path, root)
    try:
        return _load(fd, info, path, root)
    finally:
        os.close(fd)


def _open_index(path: str, root: str) -> tuple[int, os.stat_result]:
    return LocalTree(root).open_file(os.path.relpath(path, root).replace(os.sep, "/"))


def _load(fd: int, info: os.stat_result, path: str, root: str) -> ShardTable:
    if info.st_size >= SHARE_FROM_BYTES:
        try:
            return _shared(fd, path, root, _identity(path, info))
        except OSError as err:
            logger.debug("Shard table of %s not shared (%s); decoding it here.", path, err)
    return ShardTable.from_bytes(read_at_most(fd, MAX_INDEX_BYTES, path), path)


def _identity(path: str, info: os.stat_result) -> str:
    """32 hex digits naming one version of one index file on this node."""
    fields = (os.path.realpath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    text = "\0".join(str(field) for field in fields)
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def _shared(fd: int, path: str, root: str, key: str) -> SharedShardTable:
    """Map the node's table of ``key``, building it from the open index ``fd`` first if no process has."""
    state = _state_root_fd()
    # The lock file and the folder are reached through the checked descriptor of the state root, never again
    # by its path: a folder renamed or replaced meanwhile redirects nothing.
    lock_file, _ = open_shared(f"/proc/self/fd/{state}/table-{key}.lock", create=True)
    try:
        folder = _table_folder(state, key)
        try:
            table = _map(folder, key)
            if table is None:
                lock_file.acquire(_BUILD_LOCK)
                try:
                    # A process that built it meanwhile published it whole; otherwise this one builds it.
                    table = _map(folder, key) or _build(fd, path, folder, key)
                finally:
                    lock_file.release(_BUILD_LOCK)
        finally:
            os.close(folder.fd)
    except BaseException:
        close_shared(lock_file)
        raise
    table.reopen = (path, root, key)
    # The shared lock is held for as long as the table is: the cleanup leaves a table in use alone.
    weakref.finalize(table, _release, lock_file)
    return table


#: The state root this process opened (its path and descriptor), kept open for the process's life: one
#: descriptor, so the lock files below it have one name in this process (and its forked children).
_root_fd: tuple[str, int] | None = None


def _state_root_fd() -> int:
    """A descriptor of the state root, checked to be this user's folder that no one else may write to."""
    global _root_fd
    root = state_root()
    if _root_fd is not None and _root_fd[0] == root:
        return _root_fd[1]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not private_folder(os.fstat(fd)):
        os.close(fd)
        raise PermissionError(f"State folder {root} is not a folder of yours that only you can write to.")
    _root_fd = (root, fd)  # a previous root's descriptor stays open: lock files below it may still be in use
    return fd


class _Folder(NamedTuple):
    """A table's folder: its descriptor (opened below the state root's) and its path, shown in messages."""

    fd: int
    shown: str


def _table_folder(state: int, key: str) -> _Folder:
    """``table-<key>`` below the state root's descriptor ``state``: made private if missing, never a link, and
    refused (`PermissionError`) unless it is this user's folder that no one else may write to."""
    name, shown = f"table-{key}", os.path.join(state_root(), f"table-{key}")
    try:
        os.mkdir(name, 0o700, dir_fd=state)
    except FileExistsError:
        pass
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=state)
    if not private_folder(os.fstat(fd)):
        os.close(fd)
        raise PermissionError(f"Shard table folder {shown} is not a folder of yours that only you can write to.")
    return _Folder(fd, shown)


def _release(lock_file: LockFile) -> None:
    """Let go of a table; the node's last process to do so removes it (a killed one leaves it to the cleanup)."""
    path = lock_file.path
    close_shared(lock_file)
    remove_if_unused(path, path.removesuffix(".lock"))


def _map(folder: _Folder, key: str) -> SharedShardTable | None:
    """The table of the index ``key`` names in ``folder``, or None when it is not there yet (or not a table file
    of that index, which the next build replaces)."""
    shown = os.path.join(folder.shown, _TABLE_FILE)
    try:
        fd = os.open(_TABLE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder.fd)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or not stat.S_ISREG(info.st_mode) or info.st_mode & 0o022:
            raise PermissionError(f"Shard table file {shown} is not a regular file only you can write; not mapping it.")
        table = map_table(fd, shown, key)
    except TableFileError as err:
        logger.warning("%s; decoding the index again.", err)
        return None
    finally:
        os.close(fd)
    table.__class__ = SharedShardTable
    return table  # type: ignore[return-value]


def _build(fd: int, path: str, folder: _Folder, key: str) -> SharedShardTable:
    """Decode the index and publish its table file in ``folder`` (the caller holds the build lock)."""
    table = ShardTable.from_bytes(read_at_most(fd, MAX_INDEX_BYTES, path), path)
    for name in os.listdir(folder.fd):  # what a builder killed mid-write left (no one else builds meanwhile)
        if name.endswith(".tmp"):
            os.unlink(name, dir_fd=folder.fd)
    temporary = f"{_TABLE_FILE}.{uuid.uuid4().hex}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        with os.fdopen(os.open(temporary, flags, 0o600, dir_fd=folder.fd), "wb") as sink:
            write_table(table, sink, identity=key)
        os.replace(temporary, _TABLE_FILE, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
    finally:
        try:
            os.unlink(temporary, dir_fd=folder.fd)
        except FileNotFoundError:
            pass
    mapped = _map(folder, key)
    if mapped is None:
        raise TableFileError(f"Shard table file of {path} vanished as it was published.")
    return mapped


def _map_again(path: str, root: str, key: str) -> ShardTable:
    """Unpickling a `SharedShardTable`: the same version of the same index, mapped (or decoded) here."""
    fd, info = _open_index(path, root)
    try:
        if _identity(path, info) != key:
            raise RuntimeError(
                f"The index {path} changed while a dataset over it was in use (it was replaced or rewritten); "
                f"construct the dataset again."
            )
        return _load(fd, info, path, root)
    finally:
        os.close(fd)
