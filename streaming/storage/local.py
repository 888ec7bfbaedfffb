"""Local files: plain paths, `file://` URLs, and `/Volumes/...` paths when the volume is mounted here."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from typing import BinaryIO

from streaming.storage.base import CHUNK_SIZE, Storage
from streaming.storage.errors import ObjectNotFoundError, StorageError, StoragePermissionError
from streaming.storage.local_tree import LocalTree, open_regular
from streaming.storage.registry import volume_mount
from streaming.storage.url import UnsafePathError, split_url


def local_path(url: str) -> str:
    """The filesystem path that a local URL (`/x`, `file:///x`, a mounted `dbfs:/Volumes/x`) names."""
    mounted = volume_mount(url)
    if mounted is not None:
        return mounted
    location = split_url(url)
    return os.path.expanduser(location.key)


class LocalStorage(Storage):
    """Plain file I/O through `LocalTree`: nothing below ``root`` is reached through a link.

    `DatasetRoot` (and a stream's local remote) use one rooted at the dataset (`below`): every component below
    the root is opened without following a link, so a listed or indexed path cannot be redirected by a
    symlinked sub-folder, whenever it is swapped in. A backend made by `storage_for` has no root: its URLs are
    paths a caller named (a file to convert, an index to merge), which may be the caller's own links, so they
    are followed; files read are still regular files only (a FIFO fails at once). `put` writes a temp file
    next to the target and renames it into place (replacing a link there, never writing through it);
    `put_if_absent` links a complete temp file to the name (``O_EXCL`` where links are refused).
    """

    def __init__(self, root: str | None = None) -> None:
        self.root = root

    @classmethod
    def below(cls, root: str) -> LocalStorage:
        """A backend for the paths below the folder ``root`` only, following no link below it."""
        return cls(os.path.abspath(root))

    @staticmethod
    def cache_key(url: str) -> str:
        return ""

    def _tree(self, url: str) -> tuple[LocalTree, str]:
        """The tree holding ``url`` and its path relative to that tree's root (``""`` for the root itself)."""
        path = os.path.abspath(local_path(url))
        if self.root is None:
            folder, name = os.path.split(path)
            return LocalTree(folder), name
        relative = os.path.relpath(path, self.root)
        if relative == os.curdir:
            return LocalTree(self.root), ""
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            raise UnsafePathError(f"{path} is not below {self.root}: refusing to reach outside the dataset.")
        return LocalTree(self.root), relative.replace(os.sep, "/")

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        if self.root is None:
            path = os.path.abspath(local_path(url))
            fd, info = open_regular(path, None, path, os.path.dirname(path), follow=True)
            with os.fdopen(fd, "rb") as source:
                shutil.copyfileobj(source, sink, CHUNK_SIZE)
            return info.st_size
        tree, relative = self._tree(url)
        return tree.copy_to(relative, sink)

    def _upload(self, local_file: str, url: str) -> None:
        tree, relative = self._tree(url)
        with open(local_file, "rb") as source:
            tree.write_file(relative, source)

    def _upload_if_absent(self, local_file: str, url: str) -> bool:
        tree, relative = self._tree(url)
        with open(local_file, "rb") as source:
            return tree.create_exclusive(relative, source)

    def _list(self, prefix_url: str) -> Iterator[str]:
        tree, folder = self._tree(prefix_url)
        if self.root is None:  # the prefix itself is the folder listed
            tree, folder = LocalTree(os.path.abspath(local_path(prefix_url))), ""
        prefix = prefix_url.rstrip("/").rstrip(os.sep)
        for relative in tree.walk(folder):
            below = relative[len(folder) + 1 :] if folder else relative
            yield os.path.join(prefix, *below.split("/"))

    def _entry(self, url: str) -> os.stat_result | None:
        """The status of the entry (below a root, a link's own), None for a folder or nothing."""
        if self.root is None:
            try:
                info: os.stat_result | None = os.stat(local_path(url))
            except (FileNotFoundError, NotADirectoryError):
                return None
        else:
            tree, relative = self._tree(url)
            info = tree.stat(relative) if relative else None
        return None if info is None or stat.S_ISDIR(info.st_mode) else info

    def _size(self, url: str) -> int | None:
        # Only a regular file has a size to compare with an index: a link, FIFO or device counts as absent.
        info = self._entry(url)
        return info.st_size if info is not None and stat.S_ISREG(info.st_mode) else None

    def _modified(self, url: str) -> float | None:
        # Any listed entry has an age (a planted link is vacuumed as itself).
        info = self._entry(url)
        return None if info is None else info.st_mtime

    def _delete(self, url: str) -> None:
        tree, relative = self._tree(url)
        if relative:
            tree.unlink(relative)

    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        if isinstance(exc, FileNotFoundError):
            # The OS's own words ("No such file or directory") last, as callers of upstream match them.
            return ObjectNotFoundError(url, f"no such file {local_path(url)!r}: {exc.strerror or 'not found'}")
        if isinstance(exc, PermissionError):
            return StoragePermissionError(
                url, f"permission denied on {exc.filename or local_path(url)!r}; check the file mode and owner"
            )
        if isinstance(exc, OSError):  # a full disk, a directory in the file's place, a read-only filesystem...
            return StorageError(url, f"{exc.strerror or exc} on {exc.filename or local_path(url)!r}")
        return None
