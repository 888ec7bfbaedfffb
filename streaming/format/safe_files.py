"""Opening files of a dataset or cache without following symlinks out of it.

A dataset's folder may be shared, pre-created by someone else or crafted: every path a reader, writer or
cache builds from an index basename goes through `inside`, which refuses a symlink anywhere between the
dataset's folder and the file (a symlinked sub-folder or data file), so nothing is read, written or deleted
outside the dataset. New files are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under random temporary
names (`create_temp`), so a name planted in advance can never redirect a write.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafePathError(ValueError):
    """A dataset file whose path goes through a symlink (it could point outside the dataset)."""


def inside(root: str, relative: str) -> str:
    """``root/relative``, after checking that no existing component below ``root`` is a symlink.

    ``root`` itself may be a symlink (a user's own choice of where a dataset lives); everything below it must
    be real folders and files. Components that do not exist yet are fine (they will be created).

    Raises:
        UnsafePathError: a sub-folder or the file is a symlink.
    """
    path = root
    for part in relative.replace("\\", "/").split("/"):
        if not part or part == ".":
            continue
        path = os.path.join(path, part)
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return os.path.join(root, relative)
        if stat.S_ISLNK(mode):
            raise UnsafePathError(
                f"{path} is a symlink inside dataset folder {root}: refusing to follow it (it could point "
                f"outside the dataset); replace it with the real folder or file."
            )
    return os.path.join(root, relative)


def open_read(path: str) -> int:
    """A read-only descriptor of ``path``, refusing a symlink as the last component."""
    try:
        return os.open(path, os.O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
    except OSError as err:
        if O_NOFOLLOW and err.errno == errno.ELOOP and os.path.islink(path):
            raise UnsafePathError(f"{path} is a symlink: refusing to follow it.") from None
        raise


def create_new(path: str, mode: int = 0o600) -> int:
    """A write descriptor of a file this call creates (fails if anything, a symlink included, has the name)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)


def create_temp(path: str, mode: int = 0o600) -> tuple[int, str]:
    """A new file beside ``path`` under an unguessable name, to be renamed over ``path`` once complete."""
    while True:
        temp = f"{path}.tmp.{secrets.token_hex(8)}"
        try:
            return create_new(temp, mode), temp
        except FileExistsError:
            continue


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
