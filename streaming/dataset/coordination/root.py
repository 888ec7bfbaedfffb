"""Where node-local coordination files live: one private directory per user.

The default is ``/dev/shm/streaming-<uid>`` when ``/dev/shm`` is a writable tmpfs (RAM-backed, gone at reboot),
else ``<tempfile.gettempdir()>/streaming-<uid>``.  The environment variable ``STREAMING_STATE_DIR`` overrides it
(useful for tests and containers).  A per-user directory means other users' files can never collide with ours
or make us fail with permission errors.

Those names are predictable, so another user may create one first (or plant a symlink there). Such a folder
is never used: the next candidate that is, or can be made, this user's own private folder is
(`first_private_dir`: the temp folder, then ``$XDG_RUNTIME_DIR/mds-streaming``, then
``~/.cache/mds-streaming/state``). Every process of the user walks the same list, so they all agree.

A folder is trusted with state only when it is the user's own and neither its group nor other users may write
to it (`private_folder`): a member of a group that may write there could plant a link or a file under a name
the package computes, and so steer what another user's process reads. A ``STREAMING_STATE_DIR`` that is not
trusted, and a default folder of the user's own that has become writable by others, get a private
``streaming-<uid>`` folder inside them (or, if that name is taken too, the same fallbacks).
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import tempfile

logger = logging.getLogger(__name__)

STATE_DIR_ENV = "STREAMING_STATE_DIR"
_SHM = "/dev/shm"
#: Mode bits that let users other than the owner create, rename or delete entries of a folder.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


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
    if info.st_mode & _OTHERS_WRITE:
        # Others may have planted entries in it already: making it private now would not remove them.
        raise PermissionError(
            f"{what} {path} may be written by its group or other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"{remedy} to a folder only you can write to."
        )
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def first_private_dir(candidates: list[str], what: str) -> str:
    """The first of ``candidates`` that is, or can now be made, a private folder of this user.

    A candidate another user created first, or a symlink or file planted under its name, is skipped (with a
    warning naming it), so a predictable name taken by someone else never makes the package fail or use their
    folder. Missing parents of a candidate are created (``~/.cache/...``).

    Raises:
        PermissionError: no candidate can be used (each one's reason is listed).
    """
    refused = []
    for path in candidates:
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            make_private_dir(path, what)
        except (OSError, RuntimeError) as err:
            refused.append(f"{path} ({_why_unusable(path, err)})")
            continue
        if refused:
            logger.warning("%s: not using %s; using %s instead.", what, ", ".join(refused), path)
        return path
    raise PermissionError(f"No private {what.lower()} could be made: {', '.join(refused)}.")


def _why_unusable(path: str, err: BaseException) -> str:
    try:
        info = os.lstat(path)
    except OSError:
        return str(err)
    if stat.S_ISLNK(info.st_mode):
        return f"a symlink owned by uid {info.st_uid}"
    if not stat.S_ISDIR(info.st_mode):
        return f"not a folder, owned by uid {info.st_uid}"
    if info.st_uid != os.getuid():
        return f"created by uid {info.st_uid}, not by you (uid {os.getuid()})"
    return str(err)


def user_cache_home() -> str:
    """``$XDG_CACHE_HOME``, else ``~/.cache``: a folder only this user can write to (the last fallback)."""
    return os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def _fallbacks(name: str) -> list[str]:
    """Where a per-user state folder goes when its usual place is taken by another user."""
    uid = os.getuid()
    paths = [os.path.join(tempfile.gettempdir(), f"{name}-{uid}")]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        paths.append(os.path.join(runtime, "mds-streaming"))
    paths.append(os.path.join(user_cache_home(), "mds-streaming", "state"))
    return paths


def trusted_folder(path: str) -> bool:
    """Whether an existing folder is this user's and other users cannot create files in it (not world-writable).

    A group-writable folder counts as trusted: its group is the owner's choice.
    """
    info = os.stat(path)
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & stat.S_IWOTH


def private_folder(info: os.stat_result) -> bool:
    """Whether ``info`` (of a folder, not following a link) is this user's own folder that neither its group nor
    other users may write to: the only kind trusted with state."""
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & _OTHERS_WRITE


def state_root() -> str:
    """The per-user directory holding all coordination files (created on first use)."""
    uid = os.getuid()
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        root = os.path.abspath(override)
        os.makedirs(root, mode=0o700, exist_ok=True)
        if private_folder(os.stat(root)):  # the variable itself may name a link: the user's choice
            if not os.access(root, os.W_OK | os.X_OK):
                raise PermissionError(f"{STATE_DIR_ENV}={override!r} is not a writable directory.")
            return root
        # Others (a group, or everyone) may write there: they could plant or hold the files whose names the
        # package computes, so ours go in a private sub-folder.
        return first_private_dir([os.path.join(root, f"streaming-{uid}"), *_fallbacks("streaming")], "State directory")
    candidates = [os.path.join(_SHM, f"streaming-{uid}")] if _shm_is_writable_tmpfs() else []
    return first_private_dir([*_with_sub_folders(candidates), *_fallbacks("streaming")], "Coordination directory")


def _with_sub_folders(candidates: list[str]) -> list[str]:
    """Each candidate, followed by a private sub-folder of it when it is this user's own folder but its group or
    other users may write to it (so it is skipped itself)."""
    uid, listed = os.getuid(), []
    for path in candidates:
        listed.append(path)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and info.st_mode & _OTHERS_WRITE:
            listed.append(os.path.join(path, f"streaming-{uid}"))
    return listed
