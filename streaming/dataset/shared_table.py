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
half a file. Every process that maps it holds a shared lock on ``table-<key>.lock`` for as long as it uses the
table; the last one to let go removes the pair, and the state root's cleanup removes what killed processes left,
so tables never pile up between jobs.

Indexes under `SHARE_FROM_BYTES` are decoded directly: a few thousand shards decode faster than a file is made.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import uuid
import weakref
from typing import Any

from streaming.dataset.coordination.lockfile import LockFile, close_shared, open_shared, remove_if_unused
from streaming.dataset.coordination.root import state_root
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
    folder = os.path.join(state_root(), f"table-{key}")
    lock_file, _ = open_shared(folder + ".lock", create=True)
    try:
        table = _map(folder)
        if table is None:
            lock_file.acquire(_BUILD_LOCK)
            try:
                # A process that built it meanwhile published it whole; otherwise this one builds it.
                table = _map(folder) or _build(fd, path, folder)
            finally:
                lock_file.release(_BUILD_LOCK)
    except BaseException:
        close_shared(lock_file)
        raise
    table.reopen = (path, root, key)
    # The shared lock is held for as long as the table is: the cleanup leaves a table in use alone.
    weakref.finalize(table, _release, lock_file)
    return table


def _release(lock_file: LockFile) -> None:
    """Let go of a table; the node's last process to do so removes it (a killed one leaves it to the cleanup)."""
    path = lock_file.path
    close_shared(lock_file)
    remove_if_unused(path, path.removesuffix(".lock"))


def _map(folder: str) -> SharedShardTable | None:
    """The table in ``folder``, or None when it is not there yet (or not a table file, which the next build
    replaces)."""
    shown = os.path.join(folder, _TABLE_FILE)
    try:
        fd = os.open(shown, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        # The state root is private; this guards against a folder shared by mistake (STREAMING_STATE_DIR).
        if info.st_uid != os.geteuid() or not stat.S_ISREG(info.st_mode):
            raise PermissionError(f"Shard table file {shown} is not a regular file of yours; not mapping it.")
        table = map_table(fd, shown)
    except TableFileError as err:
        logger.warning("%s; decoding the index again.", err)
        return None
    finally:
        os.close(fd)
    table.__class__ = SharedShardTable
    return table  # type: ignore[return-value]


def _build(fd: int, path: str, folder: str) -> SharedShardTable:
    """Decode the index and publish its table file (the caller holds the build lock)."""
    table = ShardTable.from_bytes(read_at_most(fd, MAX_INDEX_BYTES, path), path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for name in os.listdir(folder):  # what a builder killed mid-write left (no one else builds meanwhile)
        if name.endswith(".tmp"):
            os.unlink(os.path.join(folder, name))
    temporary = os.path.join(folder, f"{_TABLE_FILE}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "xb") as sink:
            write_table(table, sink)
        os.replace(temporary, os.path.join(folder, _TABLE_FILE))
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    mapped = _map(folder)
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
