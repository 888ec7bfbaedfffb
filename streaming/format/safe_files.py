"""Creating the files a writer publishes without following a name planted in advance.

New files (shard temps, index temps) are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under random temporary
names (`create_temp`) beside their target and renamed over it once complete, so a symlink or file planted
under a predictable name can never redirect a write. A writer creates and renames through a descriptor of its
folder opened once (`open_folder`), so that folder swapped for a link while it writes does not redirect it.
Reading and deleting the files of a dataset or cache goes through `streaming.storage.local_tree.LocalTree`,
which follows no link below the dataset's folder.
"""

from __future__ import annotations

import contextlib
import os
import secrets

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def create_new(path: str, mode: int = 0o600, dir_fd: int | None = None) -> int:
    """A write descriptor of a file this call creates (fails if anything, a symlink included, has the name);
    with ``dir_fd``, ``path`` is a name in that folder."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode, dir_fd=dir_fd)


def create_temp(path: str, mode: int = 0o600, dir_fd: int | None = None) -> tuple[int, str]:
    """A new file beside ``path`` under an unguessable name, to be renamed over ``path`` once complete (with
    ``dir_fd``, names in that folder)."""
    while True:
        temp = f"{path}.tmp.{secrets.token_hex(8)}"
        try:
            return create_new(temp, mode, dir_fd), temp
        except FileExistsError:
            continue


def open_folder(path: str) -> int:
    """A descriptor of the folder ``path``, to create and rename its files through (a folder swapped for a link
    afterwards does not redirect them); closed by the caller."""
    return os.open(path, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)


def publish_in(folder: int, name: str, data: bytes | memoryview, mode: int = 0o666) -> None:
    """Write ``name`` in the folder ``folder`` atomically: a new temp file, fsynced, renamed over the name."""
    fd, temp = create_temp(name, mode, folder)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=folder)
        raise


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
