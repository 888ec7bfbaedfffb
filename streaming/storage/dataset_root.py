"""`DatasetRoot`: the root folder of one dataset on any store, addressed by root-relative ``/`` paths.

Everything goes through the storage layer (`storage_for`), so every user of a dataset root (the converters and
their commit, the commit log, `vacuum`, every command of the command line) serves every URL form the package
does: local paths, `file://`, `s3://`, `gs://`, `azure://`, `abfss://`, `oci://`, `dbfs:/`, `/Volumes/...`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable

from streaming.storage.base import Storage
from streaming.storage.errors import CredentialsError, ObjectNotFoundError
from streaming.storage.local import LocalStorage, local_path
from streaming.storage.out_argument import normalize_root
from streaming.storage.registry import exclusive_storage_for, storage_for
from streaming.storage.scratch import scratch
from streaming.storage.url import join_url, relative_to, split_url

logger = logging.getLogger(__name__)

#: The mounted volumes (``/Volumes/<catalog>/<schema>/<volume>``) the Files API answered it does not serve, in this
#: process: their commits use the mount from then on.
_API_REFUSED: set[str] = set()


def volume_root(url: str) -> str:
    """The ``/Volumes/<catalog>/<schema>/<volume>`` part of a volume path."""
    return "/".join(split_url(url).key.split("/")[:5])


class DatasetRoot:
    """The dataset root ``url`` (any URL or local path; kept in the canonical spelling of `normalize_root`)."""

    def __init__(self, url: str) -> None:
        self.url = normalize_root(url)
        self.storage: Storage = storage_for(self.url)

    @property
    def is_local(self) -> bool:
        """Whether the root is a filesystem path on this machine (a mounted volume included): files can be
        written and read there directly."""
        return isinstance(self.storage, LocalStorage)

    def child(self, relative: str) -> str:
        """The URL of a root-relative path (the root itself for ``""``)."""
        return join_url(self.url, relative) if relative else self.url

    def list_relative(self, folder: str = "") -> list[str]:
        """Every object below ``folder`` (relative to the root), as sorted root-relative ``/`` paths."""
        return [relative_to(url, self.url) for url in self.storage.list(self.child(folder))]

    def size(self, relative: str) -> int | None:
        """A file's size, or None when it does not exist."""
        try:
            return self.storage.size(self.child(relative))
        except ObjectNotFoundError:
            return None

    def fetch(self, relative: str, local_dir: str) -> str:
        """A local copy of a file at ``local_dir/<relative>`` (the file itself when the root is local)."""
        if self.is_local:
            return os.path.join(local_path(self.url), *relative.split("/"))
        target = os.path.join(local_dir, *relative.split("/"))
        self.storage.get(self.child(relative), target)
        return target

    def read_bytes(self, relative: str) -> bytes:
        """The bytes of a small file; ObjectNotFoundError (a FileNotFoundError) when it does not exist."""
        with scratch("mds-root-") as folder:
            path = os.path.join(folder, "object")
            self.storage.get(self.child(relative), path)
            with open(path, "rb") as file:
                return file.read()

    def read_text(self, relative: str) -> str | None:
        """The text of a small file, or None if it does not exist."""
        if not self.storage.exists(self.child(relative)):
            return None
        return self.read_bytes(relative).decode("utf-8")

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
            _remove_empty_folders(local_path(self.url))
        return count


def _remove_empty_folders(root: str) -> None:
    """Remove empty folders below ``root`` (not ``root`` itself), deepest first."""
    for folder, _, _ in sorted(os.walk(root), key=lambda entry: -entry[0].count(os.sep)):
        if folder != root:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
