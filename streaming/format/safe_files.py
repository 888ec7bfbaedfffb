"""Creating the files a writer publishes without following a name planted in advance.

New files (shard temps, index temps) are created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under random temporary
names (`create_temp`) beside their target and renamed over it once complete, so a symlink or file planted
under a predictable name can never redirect a write. Reading and deleting the files of a dataset or cache
goes through `streaming.storage.local_tree.LocalTree`, which follows no link below the dataset's folder.
"""

from __future__ import annotations

import os
import secrets

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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
