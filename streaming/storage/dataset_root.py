"""`DatasetRoot`: the root folder of one dataset on any store, addressed by root-relative ``/`` paths.

Everything goes through the storage layer (`storage_for`), so every user of a dataset root (the converters and
their commit, the commit log, `vacuum`, every command of the command line) serves every URL form the package
does: local paths, `file://`, `s3://`, `gs://`, `azure://`, `abfss://`, `oci://`, `dbfs:/`, `/Volumes/...`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from streaming.storage.base import Storage
from streaming.storage.errors import CredentialsError, ObjectNotFoundError
from streaming.storage.local import LocalStorage, local_path
from streaming.storage.local_tree import LocalTree
from streaming.storage.out_argument import normalize_root
from streaming.storage.registry import exclusive_storage_for, storage_for
from streaming.storage.scratch import scratch
from streaming.storage.url import check_relative_path, join_url, relative_to, split_url

logger = logging.getLogger(__name__)

#: The largest small file (an index, a commit, a conversion record) read whole into memory.
MAX_SMALL_FILE = 1 << 30

#: The mounted volumes (``/Volumes/<catalog>/<schema>/<volume>``) the Files API answered it does not serve, in this
#: process: their commits use the mount from then on.
_API_REFUSED: set[str] = set()


def volume_root(url: str) -> str:
    """The ``/Volumes/<catalog>/<schema>/<volume>`` part of a volume path."""
    return "/".join(split_url(url).key.split("/")[:5])


class DatasetRoot:
    """The dataset root ``url`` (any URL or local path; kept in the canonical spelling of `normalize_root`).

    Every root-relative path, whether it comes from an index, a commit, a listing or a destination's contents,
    is checked by `check_relative_path` before it is joined to the root (`child`). On a local or mounted root,
    every file is reached through `LocalTree` (the storage is `LocalStorage.below` the root): nothing is read,
    written, renamed or deleted through a link below the root, even one swapped in after a listing.
    """

    def __init__(self, url: str) -> None:
        self.url = normalize_root(url)
        storage = storage_for(self.url)
        self.storage: Storage = (
            LocalStorage.below(local_path(self.url)) if isinstance(storage, LocalStorage) else storage
        )

    @property
    def is_local(self) -> bool:
        """Whether the root is a filesystem path on this machine (a mounted volume included): files can be
        written and read there directly."""
        return isinstance(self.storage, LocalStorage)

    @property
    def tree(self) -> LocalTree:
        """The root as a `LocalTree` (a local or mounted root only)."""
        if not isinstance(self.storage, LocalStorage) or self.storage.root is None:
            raise ValueError(f"{self.url} is not a local folder.")
        return LocalTree(self.storage.root)

    def child(self, relative: str) -> str:
        """The URL of a root-relative path (the root itself for ``""``), after checking the path stays inside."""
        if not relative:
            return self.url
        return join_url(self.url, check_relative_path(relative, f"dataset {self.url}"))

    def list_relative(self, folder: str = "") -> list[str]:
        """Every object below ``folder`` (relative to the root), as sorted root-relative ``/`` paths, each checked
        as an index basename is (a listed name that could leave the root is refused, naming it)."""
        where = f"listing of {self.url}"
        return [
            check_relative_path(relative_to(url, self.url), where, "listed file")
            for url in self.storage.list(self.child(folder))
        ]

    def size(self, relative: str) -> int | None:
        """A file's size, or None when it does not exist."""
        try:
            return self.storage.size(self.child(relative))
        except ObjectNotFoundError:
            return None

    def modified(self, relative: str) -> float:
        """When a file was last written (POSIX seconds); ObjectNotFoundError if it does not exist."""
        return self.storage.modified(self.child(relative))

    def fetch(self, relative: str, local_dir: str, size: int | None = None) -> str:
        """A private copy of a file at ``local_dir/<relative>``, refusing more than ``size`` bytes when given.

        A local root is copied too, through `LocalTree` (a regular file, no link, no FIFO), so callers never
        open a path inside a folder others may change.
        """
        target = os.path.join(local_dir, *relative.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if self.is_local:
            with open(target, "wb") as sink:
                self.tree.copy_to(check_relative_path(relative, f"dataset {self.url}"), sink, size)
            return target
        self.storage.get(self.child(relative), target, max_bytes=size)
        return target

    def read_bytes(self, relative: str, limit: int = MAX_SMALL_FILE) -> bytes:
        """The bytes of a small file (at most ``limit``); ObjectNotFoundError (a FileNotFoundError) when it does
        not exist."""
        url = self.child(relative)
        if self.is_local:
            try:
                return self.tree.read_bytes(relative, limit)
            except FileNotFoundError:
                raise ObjectNotFoundError(url, "no such file") from None
        with scratch("mds-root-") as folder:
            path = os.path.join(folder, "object")
            self.storage.get(url, path, max_bytes=limit)
            with open(path, "rb") as file:
                return file.read()

    def read_text(self, relative: str, limit: int = MAX_SMALL_FILE) -> str | None:
        """The text of a small file, or None if it does not exist."""
        try:
            return self.read_bytes(relative, limit).decode("utf-8")
        except ObjectNotFoundError:
            return None

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Publish a small file in one atomic step (a rename, or a single upload)."""
        with scratch("mds-root-") as folder:
            path = os.path.join(folder, os.path.basename(relative))
            with open(path, "wb") as file:
                file.write(data)
            self.storage.put(path, self.child(relative))

    def write_text(self, relative: str, text: str) -> None:
        """Publish a small text file atomically."""
        self.write_bytes(relative, text.encode("utf-8"))

    def create_text(self, relative: str, text: str) -> bool:
        """Create a small file only if none is there, exclusively across machines (`exclusive_storage_for`: the
        store's create-only write, the Files API for a mounted volume); False if one was.

        Where the Files API does not serve a mounted ``/Volumes`` path (no credentials, or not a volume of the
        workspace it reaches), the mount's own create-only write is used, which is exclusive on this node only.
        """
        url = self.child(relative)
        with scratch("mds-root-") as folder:
            path = os.path.join(folder, os.path.basename(relative))
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
            exclusive = exclusive_storage_for(url)
            if exclusive is not self.storage and volume_root(url) not in _API_REFUSED:
                try:
                    return exclusive.put_if_absent(path, url)
                except (CredentialsError, ObjectNotFoundError) as err:
                    _API_REFUSED.add(volume_root(url))
                    logger.warning(
                        "The Files API does not serve %s (%s); its commits use the mount, exclusive on this node only.",
                        volume_root(url),
                        type(err).__name__,
                    )
            return self.storage.put_if_absent(path, url)

    def delete(self, relatives: Iterable[str]) -> int:
        """Delete files by root-relative path; return how many were deleted."""
        count = 0
        for relative in relatives:
            self.storage.delete(self.child(relative))
            count += 1
        if self.is_local:
            self.tree.remove_empty_folders()
        return count

    def remove_tree(self, relative: str) -> None:
        """Delete a folder and everything below it (on a local root without following a link)."""
        if self.is_local:
            self.tree.remove_tree(check_relative_path(relative, f"dataset {self.url}"))
            return
        self.delete(self.list_relative(relative))
