"""A dataset root on any store, as the commands see it: its files, its index, and local copies of files.

Everything goes through the storage layer (`storage_for`), so each command serves every URL form the package
does: local paths, `file://`, `s3://`, `gs://`, `azure://`, `abfss://`, `oci://`, `dbfs:/`, `/Volumes/...`.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from streaming.format.index import get_index_basename, parse_index
from streaming.storage.base import Storage, storage_for
from streaming.storage.errors import ObjectNotFoundError
from streaming.storage.output import normalize_root
from streaming.storage.url import is_remote, join_url, relative_to


class MissingIndexError(FileNotFoundError):
    """The dataset root has no `index.json`."""


class DatasetLocation:
    """The root folder of one dataset (the folder that holds, or should hold, its `index.json`)."""

    def __init__(self, url: str) -> None:
        self.root = normalize_root(url)
        self.storage: Storage = storage_for(self.root)

    @property
    def is_local(self) -> bool:
        return not is_remote(self.root)

    def url(self, relative: str) -> str:
        """The URL of a root-relative `/` path."""
        return join_url(self.root, relative) if relative else self.root

    def files(self) -> list[str]:
        """Every file below the root, as sorted root-relative `/` paths."""
        return sorted(relative_to(url, self.root) for url in self.storage.list(self.root))

    def size(self, relative: str) -> int | None:
        """A file's size, or None when it does not exist."""
        try:
            return self.storage.size(self.url(relative))
        except ObjectNotFoundError:
            return None

    def fetch(self, relative: str, local_dir: str) -> str:
        """A local copy of a file at `local_dir/<relative>` (the file itself when the root is local)."""
        if self.is_local:
            return os.path.join(self.root, *relative.split("/"))
        target = os.path.join(local_dir, *relative.split("/"))
        self.storage.get(self.url(relative), target)
        return target

    def read_bytes(self, relative: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="mds-cli-") as scratch:
            with open(self.fetch(relative, scratch), "rb") as stream:
                return stream.read()

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Publish a small file in one atomic step (rename or single PUT)."""
        with tempfile.TemporaryDirectory(prefix="mds-cli-") as scratch:
            path = os.path.join(scratch, os.path.basename(relative))
            with open(path, "wb") as stream:
                stream.write(data)
            self.storage.put(path, self.url(relative))

    def read_index(self) -> list[dict[str, Any]]:
        """The shard entries of `index.json`, validated; MissingIndexError says what to do when there is none."""
        name = get_index_basename()
        try:
            text = self.read_bytes(name)
        except (ObjectNotFoundError, FileNotFoundError):
            raise MissingIndexError(
                f"No {name} at {self.root}. Is this the dataset's root folder (the one holding {name})? If the "
                f"index was lost or damaged, rebuild it from the shards: mds-streaming rebuild-index {self.root}"
            ) from None
        return parse_index(text, self.url(name))
