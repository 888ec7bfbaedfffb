"""Lock files: one open file per path per process, kernel locks for liveness and byte-range exclusion.

Every file under the state root is guarded the same way:

* each process using it holds ``flock(LOCK_SH)`` on it for as long as it uses it.  The kernel drops that lock when
  the process dies (even by SIGKILL), so "nobody holds any lock" means "nobody uses it" and the file may be
  deleted (:func:`remove_if_unused`);
* exclusion between processes uses POSIX byte-range locks (``fcntl.lockf``) at chosen offsets, also released by
  the kernel at death.  POSIX locks belong to the process, so they do not exclude threads of one process, and
  closing *any* descriptor of the file drops *all* of the process's locks on it.  Hence this module keeps exactly
  one descriptor per path per process (a registry with use counts) and adds per-process thread exclusion.

Deleting a lock file races with someone opening it; openers therefore lock first and then check that the path
still names the inode they locked (else they retry), and deleters only unlink while holding an exclusive lock.
After ``fork`` the child keeps the inherited descriptors (so locks held through them stay shared) but starts with
fresh thread bookkeeping, since POSIX locks are not inherited.

A lock file may also hold shared state, mapped with :meth:`LockFile.mapping`. Python's ``mmap`` keeps its own
duplicate of the descriptor and closes it when the mapping goes, which drops every POSIX lock of the process on
the file just like any other close: a second mapping of the file, garbage-collected while another thread held
a lock or a claim, silently freed them (another process then took a live download for a dead one). So each file
is mapped once per process, and its mapping is closed only once the file is no longer open here.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import shutil
import stat
import threading
import time
import uuid

_RETRY_SLEEP = 0.002
_BUSY = (errno.EACCES, errno.EAGAIN)


def same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def _lock_range(fd: int, offset: int, blocking: bool) -> bool:
    """Take the exclusive POSIX lock on byte ``offset``; False if non-blocking and another process has it."""
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
            return True
        except OSError as err:
            if not blocking and err.errno in _BUSY:
                return False
            if err.errno != errno.EDEADLK:
                raise
        # The kernel reports a deadlock per process, not per thread, so a wait between two multi-threaded
        # processes can be flagged although the holders are making progress: wait a moment and try again.
        time.sleep(_RETRY_SLEEP)


def _unlock_range(fd: int, offset: int) -> None:
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


class LockFile:
    """This process's single descriptor of one lock file, with thread-aware byte-range locks.

    Two kinds of byte-range lock are offered, on disjoint offsets chosen by the caller:

    * :meth:`acquire` / :meth:`release`: owned by a thread, reentrant for that thread, excluding other threads
      of this process and other processes;
    * :meth:`claim` / :meth:`unclaim`: owned by the process (any thread may release), for marks that outlive a
      call, such as "this process is preparing shard 7".
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.users = 1
        on_disk = os.fstat(fd)
        self.inode = (on_disk.st_dev, on_disk.st_ino)
        self._map: mmap.mmap | None = None
        self._reset_threads()

    def mapping(self, size: int) -> mmap.mmap:
        """This process's one shared mapping of the file's first ``size`` bytes (the file is grown to hold them).

        Never close it, nor map the file another way: closing a mapping drops this process's locks on the file.
        """
        with self._cond:
            if self._map is None:
                self._map = _idle_maps.pop(self.inode, None)
                if self._map is None:
                    if os.fstat(self.fd).st_size < size:
                        os.ftruncate(self.fd, size)
                    self._map = mmap.mmap(self.fd, size)
            if len(self._map) < size:
                raise ValueError(f"{self.path} is mapped with {len(self._map)} bytes; {size} were asked for.")
            return self._map

    def _close(self) -> None:
        """Close the descriptor once its last use ended; its mapping is closed when nothing can lose a lock by it."""
        os.close(self.fd)
        if self._map is not None:
            _idle_maps[self.inode] = self._map
            self._map = None
            _close_idle_maps()

    def _reset_threads(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._holders: dict[int, list[int]] = {}
        self._claims: set[int] = set()

    def acquire(self, offset: int, blocking: bool = True) -> int:
        """Lock byte ``offset`` for the calling thread; returns the hold depth (0 if not acquired)."""
        me = threading.get_ident()
        # Threads first, then processes: a POSIX lock is the process's, so a second thread would "get" the byte
        # its sibling holds. Only the thread that won the in-process slot goes to the kernel.
        with self._cond:
            while True:
                holder = self._holders.get(offset)
                if holder is None:
                    self._holders[offset] = [me, 1]
                    break
                if holder[0] == me:
                    holder[1] += 1
                    return holder[1]
                if not blocking:
                    return 0
                self._cond.wait()
        try:
            locked = _lock_range(self.fd, offset, blocking)
        except BaseException:
            self._forget(offset)
            raise
        if not locked:
            self._forget(offset)
            return 0
        return 1

    def release(self, offset: int) -> None:
        """Undo one :meth:`acquire` of the calling thread."""
        with self._cond:
            holder = self._holders[offset]
            holder[1] -= 1
            if holder[1]:
                return
        _unlock_range(self.fd, offset)
        self._forget(offset)

    def _forget(self, offset: int) -> None:
        with self._cond:
            del self._holders[offset]
            self._cond.notify_all()

    def claim(self, offset: int) -> bool:
        """Lock byte ``offset`` for this process without waiting; False if this or another process has it."""
        with self._cond:
            if offset in self._claims or not _lock_range(self.fd, offset, blocking=False):
                return False
            self._claims.add(offset)
            return True

    def unclaim(self, offset: int) -> bool:
        """Drop this process's claim on ``offset``; returns whether it had one."""
        with self._cond:
            if offset not in self._claims:
                return False
            _unlock_range(self.fd, offset)
            self._claims.discard(offset)
            return True

    def claimed(self, offset: int) -> bool:
        """Whether some live process (this one included) holds a claim on ``offset``."""
        with self._cond:
            if offset in self._claims:
                return True
            # A non-blocking lock and unlock is the portable test (Python has no F_GETLK); this process's own
            # claims were answered above, since a process's POSIX locks never conflict with each other.
            if _lock_range(self.fd, offset, blocking=False):
                _unlock_range(self.fd, offset)
                return False
            return True

    def claims(self) -> int:
        """How many offsets this process has claimed."""
        return len(self._claims)

    def sole_user(self) -> bool:
        """Whether no other process has this file open (call while holding a byte-range lock on it).

        The shared flock is briefly converted to exclusive and back.  The byte-range lock the caller holds keeps
        :func:`remove_if_unused` away from the file during the conversion.
        """
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone = True
        except BlockingIOError:
            alone = False
        fcntl.flock(self.fd, fcntl.LOCK_SH)
        return alone


_registry: dict[str, LockFile] = {}
#: (device, inode) -> a mapping of a lock file this process no longer has open, kept until it can be closed.
_idle_maps: dict[tuple[int, int], mmap.mmap] = {}


def _close_idle_maps() -> None:
    """Close the idle mappings nothing uses any more (registry lock held).

    A mapping's views may outlive its file's last use (a finaliser runs before its object's attributes go). Left
    to itself, the mapping would close when they go, at any moment, perhaps while this process holds locks on the
    file again; so it is closed here, once no view is left and the file is not open here.
    """
    open_now = {lock_file.inode for lock_file in _registry.values()}
    for inode, mapping in list(_idle_maps.items()):
        if inode in open_now:
            continue
        try:
            mapping.close()
        except BufferError:
            continue  # views of it are still alive
        del _idle_maps[inode]


_registry_lock = threading.Lock()
_registry_owner: int | None = None
_deferred_releases: list[tuple[LockFile, bool]] = []


class _RegistryGuard:
    """The registry lock, plus a way out for garbage-collection finalisers.

    A finaliser (``weakref.finalize`` of an instance state) may run in the middle of a registry update on the
    same thread; taking the lock again there would deadlock. Such a release is queued instead and carried
    out as soon as the lock is free.
    """

    def __enter__(self) -> None:
        global _registry_owner
        _registry_lock.acquire()
        _registry_owner = threading.get_ident()
        _close_idle_maps()

    def __exit__(self, *exc: object) -> None:
        global _registry_owner
        _registry_owner = None
        _registry_lock.release()
        while _deferred_releases:
            lock_file, unlink = _deferred_releases.pop()
            close_shared(lock_file, unlink)


_registry_guard = _RegistryGuard()


def _after_fork_in_child() -> None:
    global _registry_lock, _registry_owner
    _registry_lock = threading.Lock()
    _registry_owner = None
    for lock_file in _registry.values():
        lock_file._reset_threads()


os.register_at_fork(after_in_child=_after_fork_in_child)


def open_and_share(path: str, flags: int) -> int | None:
    """Open ``path``, hold a shared flock on it; None if it was deleted before the lock was taken."""
    # O_NOFOLLOW: in a shared state folder, a planted symlink must not make us create or lock another file.
    fd = os.open(path, flags | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    try:
        # Another user's file (planted in a shared state folder) could be held to block us, or hold state
        # that steers our reads: only our own regular files are used.
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or not stat.S_ISREG(info.st_mode):
            raise PermissionError(
                f"Lock file {path} is not a regular file of yours (uid {info.st_uid}); the state folder is shared "
                f"with another user: leave STREAMING_STATE_DIR unset, or point it at a folder of your own."
            )
        fcntl.flock(fd, fcntl.LOCK_SH)
        # A deleter may have unlinked the path between our open and our lock: then we hold a lock on an
        # orphaned inode that nobody else can find, and must open the path again.
        if same_file(fd, path):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def open_shared(path: str, create: bool) -> tuple[LockFile, bool]:
    """This process's :class:`LockFile` for ``path`` and whether this call opened it.

    With ``create`` the file is made if missing; otherwise a missing file raises ``FileNotFoundError``.
    """
    with _registry_guard:
        lock_file = _registry.get(path)
        # One descriptor per path per process: closing a second one would drop every POSIX lock held through
        # the first.
        if lock_file is not None:
            if same_file(lock_file.fd, path):
                lock_file.users += 1
                return lock_file, False
            del _registry[path]  # deleted by its owner; the users it still has keep their descriptor
        while True:
            fd = open_and_share(path, os.O_CREAT if create else 0)
            if fd is not None:
                break
            if not create:
                raise FileNotFoundError(errno.ENOENT, "Lock file was removed", path)
        lock_file = _registry[path] = LockFile(path, fd)
        return lock_file, True


def create_unique(root: str, kind: str, suffix: str = ".lock") -> LockFile:
    """Create a new lock file ``<root>/<kind>-<uuid4 hex><suffix>`` held by this process."""
    while True:
        path = os.path.join(root, f"{kind}-{uuid.uuid4().hex}{suffix}")
        fd = open_and_share(path, os.O_CREAT | os.O_EXCL)
        if fd is None:
            continue
        with _registry_guard:
            lock_file = _registry[path] = LockFile(path, fd)
        return lock_file


def close_shared(lock_file: LockFile, unlink: bool = False) -> None:
    """Undo one :func:`open_shared` or :func:`create_unique`; the last use closes the file (unlinking it if asked).

    (:meth:`LockFile.release` is another thing: it unlocks one byte range.)
    """
    if _registry_owner == threading.get_ident():
        _deferred_releases.append((lock_file, unlink))
        return
    with _registry_guard:
        if unlink and same_file(lock_file.fd, lock_file.path):
            os.unlink(lock_file.path)
            if _registry.get(lock_file.path) is lock_file:
                del _registry[lock_file.path]
        lock_file.users -= 1
        if lock_file.users > 0:
            return
        if _registry.get(lock_file.path) is lock_file:
            del _registry[lock_file.path]
        lock_file._close()


def remove_if_unused(path: str, companion_dir: str | None = None) -> bool:
    """Delete ``path`` (and ``companion_dir``) if no live process holds any lock on it; returns whether it did."""
    with _registry_guard:
        if path in _registry:
            return False
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except (FileNotFoundError, PermissionError):
            return False
        try:
            try:
                # Both lock kinds: every user holds a shared flock, and a byte-range holder may have closed no
                # flock yet; only when neither is held by anyone is the file unused.
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0)
            except OSError as err:
                if err.errno in (*_BUSY, errno.EWOULDBLOCK):
                    return False
                raise
            if not same_file(fd, path):
                return False
            if companion_dir is not None:
                shutil.rmtree(companion_dir, ignore_errors=True)
            os.unlink(path)
            return True
        finally:
            os.close(fd)
