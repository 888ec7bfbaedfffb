"""Which remote a local cache directory holds the shards of, while live datasets use it.

Two datasets must never mix shards of different remotes in one directory (same file names, other bytes). Each
dataset claims its streams' directories for as long as it lives: ``<root>/local-<hash>.lock`` (hash of the
directory's realpath) holds the remote's location, and every claimant keeps the file open with a shared flock
(so the kernel forgets a claim when its process dies). The first live claimant writes the remote; later ones
must name the same remote.

A documented difference from upstream, which refuses any second live dataset on a directory when it has a
remote: datasets of the *same* remote may share one cache. Downloads are serialised by per-shard locks and the
accounting is node-wide, so they cooperate rather than collide. A stream without a remote claims nothing (its
directory is the data, not a cache).
"""

from __future__ import annotations

import os
import weakref

from streaming.dataset.coordination import lockfile
from streaming.dataset.coordination.root import state_root
from streaming.dataset.coordination.shard_locks import dir_key

_CLAIM_LOCK = 0
_CONTENT_AT = 1


def _read_claim(fd: int) -> str:
    size = os.fstat(fd).st_size
    return os.pread(fd, max(size - _CONTENT_AT, 0), _CONTENT_AT).decode("utf-8", "surrogateescape")


def _write_claim(fd: int, remote: str) -> None:
    os.ftruncate(fd, _CONTENT_AT)
    os.pwrite(fd, remote.encode("utf-8", "surrogateescape"), _CONTENT_AT)


class LocalDirClaims:
    """This dataset's claims on its local directories, dropped when it is garbage collected or the process ends.

    Args:
        dirs_and_remotes: each local directory with the location of the remote it caches (``None``: no remote,
            nothing to claim).

    Raises:
        ValueError: a live dataset on this node uses one of the directories for another remote.
    """

    def __init__(self, dirs_and_remotes: list[tuple[str, str | None]]) -> None:
        files: list[lockfile.LockFile] = []
        try:
            for local_dir, remote in dirs_and_remotes:
                if remote is not None:
                    files.append(self._claim(local_dir, remote))
        except BaseException:
            _close_all(files)
            raise
        self._finalizer = weakref.finalize(self, _close_all, files)

    @staticmethod
    def _claim(local_dir: str, remote: str) -> lockfile.LockFile:
        path = os.path.join(state_root(), f"local-{dir_key([local_dir])}.lock")
        lock_file, opened_here = lockfile.open_shared(path, create=True)
        lock_file.acquire(_CLAIM_LOCK)
        try:
            holder = None if opened_here and lock_file.sole_user() else _read_claim(lock_file.fd)
            if not holder:
                # No live claimant (a file left by dead ones says nothing): the directory is ours to label.
                _write_claim(lock_file.fd, remote)
            elif holder != remote:
                raise ValueError(
                    f"Reused local directory: {local_dir} is the cache of {holder} for a live dataset, and this "
                    f"one streams {remote} into it. Provide a different local directory (datasets of the same "
                    f"remote may share one)."
                )
        except BaseException:
            lock_file.release(_CLAIM_LOCK)
            lockfile.close_shared(lock_file)
            raise
        lock_file.release(_CLAIM_LOCK)
        return lock_file

    def close(self) -> None:
        """Drop the claims now (else done at garbage collection or exit)."""
        self._finalizer()


def _close_all(files: list[lockfile.LockFile]) -> None:
    for lock_file in files:
        lockfile.close_shared(lock_file)
