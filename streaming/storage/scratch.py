"""Scratch folders in the temporary directory that outlive no process: a killed owner's are removed by the next.

Every working folder this package makes under ``tempfile.gettempdir()`` is one of these (a dataset's download
cache is not a working folder): a writer's staging folder for a remote ``out``, a conversion task's attempt and its
downloaded input, an index being published or merged, the CLI's copies of shards. A process that is SIGKILLed (an
out-of-memory kill, a preempted node, a cancelled job) cannot remove its folder, and a staging folder can hold
several shards. So each folder holds an ``.owner`` file on which its process keeps an
exclusive ``flock``; the kernel drops the lock when the process dies, whatever killed it. The first folder a
process makes with a prefix first removes that prefix's folders whose lock it can take (their owner is dead).
Liveness is the kernel's lock, not a pid, so it holds across PID namespaces sharing one ``/tmp``; folders of
other users and folders without an ``.owner`` file are never touched. A new owner file is unlocked for an instant
after it is made, so a sweep can take it for a dead owner's and remove it; its maker checks, once it holds the lock,
that the file is still there, and otherwise starts again with a new name.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator

OWNER_SUFFIX = ".owner"
_held: dict[str, int] = {}  # scratch folder -> the descriptor that holds its owner file's lock
_swept: set[tuple[str, str]] = set()
_lock = threading.Lock()


def make_scratch(prefix: str) -> str:
    """A new empty folder ``<tmp>/<prefix>XXXXXXXX`` owned by this process; remove it with `remove_scratch`."""
    root = tempfile.gettempdir()
    with _lock:
        first = (root, prefix) not in _swept
        _swept.add((root, prefix))
    if first:
        remove_orphaned_scratch(root, prefix)
    # The owner file comes first, so that no folder ever exists without one.
    while True:
        fd, owner = tempfile.mkstemp(prefix=prefix, suffix=OWNER_SUFFIX, dir=root)
        fcntl.flock(fd, fcntl.LOCK_EX)
        # Another process's sweep may have taken the new file for a dead owner's before this lock: it then removed
        # the file, and a folder made now would have no owner file (never swept). Take a new name instead.
        if _is_same_file(fd, owner):
            break
        os.close(fd)
    path = owner[: -len(OWNER_SUFFIX)]
    os.mkdir(path, 0o700)
    with _lock:
        _held[path] = fd
    return path


def _is_same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def remove_scratch(path: str) -> None:
    """Delete a folder made by `make_scratch`, then its owner file, and release the lock."""
    shutil.rmtree(path, ignore_errors=True)
    _disown(path)


def keep_scratch(path: str) -> None:
    """Make a folder made by `make_scratch` an ordinary one, never swept: for files a caller asked to keep."""
    _disown(path)


def _disown(path: str) -> None:
    """Remove the owner file of a scratch folder, then release its lock (a sweep only takes a locked owner file)."""
    with _lock:
        fd = _held.pop(path, None)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path + OWNER_SUFFIX)
    if fd is not None:
        os.close(fd)


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[str]:
    """`make_scratch` for the duration of a ``with`` block."""
    path = make_scratch(prefix)
    try:
        yield path
    finally:
        remove_scratch(path)


def remove_orphaned_scratch(root: str, prefix: str) -> int:
    """Remove this user's ``<prefix>*`` folders under ``root`` whose owner process is gone; how many went."""
    try:
        owners = [name for name in os.listdir(root) if name.startswith(prefix) and name.endswith(OWNER_SUFFIX)]
    except OSError:
        return 0
    removed = 0
    for name in owners:
        owner = os.path.join(root, name)
        path = owner[: -len(OWNER_SUFFIX)]
        with _lock:
            if path in _held:
                continue
        try:
            info = os.lstat(owner)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                continue
            fd = os.open(owner, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile or not ours: left alone
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # its owner is alive
            continue
        if not _is_same_file(fd, owner):  # another sweep removed it while this one waited: nothing left to do
            os.close(fd)
            continue
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(owner)
        os.close(fd)
        removed += 1
    return removed
