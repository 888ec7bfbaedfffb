"""`Destination`: a dataset root reached only through the storage layer, addressed by root-relative paths."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

from streaming.storage.base import Storage, storage_for
from streaming.storage.local import LocalStorage, local_path
from streaming.storage.output import normalize_root
from streaming.storage.scratch import scratch
from streaming.storage.url import join_url, relative_to


class Destination:
    """The dataset root ``url`` (any URL or local path; kept in the canonical spelling of `normalize_root`)."""

    def __init__(self, url: str) -> None:
        self.url = normalize_root(url)
        self.storage: Storage = storage_for(self.url)

    @property
    def is_local(self) -> bool:
        """Whether the destination is a filesystem path on this machine (tasks can write it directly)."""
        return isinstance(self.storage, LocalStorage)

    def child(self, relative: str) -> str:
        """The URL of a root-relative path (the root itself for ``""``)."""
        return join_url(self.url, relative) if relative else self.url

    def list_relative(self, folder: str = "") -> list[str]:
        """Every object below ``folder`` (relative to the root), as root-relative ``/`` paths."""
        return [relative_to(url, self.url) for url in self.storage.list(self.child(folder))]

    def read_text(self, relative: str) -> str | None:
        """The text of a small object, or None if it does not exist."""
        url = self.child(relative)
        if not self.storage.exists(url):
            return None
        with scratch("mds-spark-") as folder:
            path = os.path.join(folder, "object")
            self.storage.get(url, path)
            with open(path, encoding="utf-8") as file:
                return file.read()

    def write_text(self, relative: str, text: str) -> None:
        """Publish a small object atomically."""
        with scratch("mds-spark-") as folder:
            path = os.path.join(folder, os.path.basename(relative))
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
            self.storage.put(path, self.child(relative))

    def create_text(self, relative: str, text: str) -> bool:
        """Create a small object only if none is there (the store's create-only write); False if one was."""
        with scratch("mds-spark-") as folder:
            path = os.path.join(folder, os.path.basename(relative))
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
            return self.storage.put_if_absent(path, self.child(relative))

    def delete(self, relatives: Iterable[str]) -> int:
        """Delete objects by root-relative path; return how many were deleted."""
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
