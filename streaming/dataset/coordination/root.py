"""Where node-local coordination files live: one private directory per user.

The default is ``/dev/shm/streaming-<uid>`` when ``/dev/shm`` is a writable tmpfs (RAM-backed, gone at reboot),
else ``<tempfile.gettempdir()>/streaming-<uid>``.  The environment variable ``STREAMING_STATE_DIR`` overrides it
(useful for tests and containers).  A per-user directory means other users' files can never collide with ours
or make us fail with permission errors.
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile

STATE_DIR_ENV = "STREAMING_STATE_DIR"
_SHM = "/dev/shm"


@functools.lru_cache(maxsize=1)
def _shm_is_writable_tmpfs() -> bool:
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            tmpfs = any(
                fields[1] == _SHM and fields[2] == "tmpfs"
                for fields in (line.split() for line in mounts)
                if len(fields) > 2
            )
    except OSError:
        return False
    return tmpfs and os.access(_SHM, os.W_OK | os.X_OK)


def make_private_dir(path: str, what: str = "Coordination directory", remedy: str = f"set {STATE_DIR_ENV}") -> None:
    """Create ``path`` with mode 0700, or check that the existing one is a real directory owned by us.

    ``what`` names the directory and ``remedy`` says how to choose another one, in the errors.
    """
    uid = os.getuid()
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)
        return
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeError(f"{what} {path} exists but is not a directory; remove it or {remedy} to another directory.")
    if info.st_uid != uid:
        raise PermissionError(
            f"{what} {path} belongs to uid {info.st_uid}, not to you (uid {uid}); {remedy} to a directory of your own."
        )
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def state_root() -> str:
    """The per-user directory holding all coordination files (created on first use)."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        root = os.path.abspath(override)
        os.makedirs(root, mode=0o700, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise PermissionError(f"{STATE_DIR_ENV}={override!r} is not a writable directory.")
        return root
    base = _SHM if _shm_is_writable_tmpfs() else tempfile.gettempdir()
    root = os.path.join(base, f"streaming-{os.getuid()}")
    make_private_dir(root)
    return root
