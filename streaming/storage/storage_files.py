"""`storage_filesystem`: a read-only pyarrow filesystem over the package's own storage backend, rooted at a table.

Delta's readers here (`streaming.delta.snapshot`, the Delta and Parquet streams) read a table's files through a
pyarrow filesystem rooted at the table: for a local one `streaming.storage.table_files.table_filesystem`, for a
cloud one delta-rs's object store. delta-rs's store has no ``dbfs:/`` scheme and cannot reach a ``/Volumes/...``
path the Databricks Files API serves (no mount here); those go through the backend `storage_for` gives them, the one
every other read of the package uses (its credentials, retries and errors). A file opened is downloaded whole
first, into a private scratch folder removed at once (the open file stays readable; a killed process's is swept by
the next, `streaming.storage.scratch`): what is opened this way is a
log's commits and checkpoints, deletion vectors and a Parquet folder's footers, while a stream's data files go
through its shard cache.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
from pyarrow import fs as pafs

from streaming.storage.errors import ObjectNotFoundError
from streaming.storage.registry import storage_for
from streaming.storage.scratch import scratch
from streaming.storage.url import check_relative_path, join_url, relative_to


def storage_filesystem(root: str) -> pafs.FileSystem:
    """A read-only pyarrow filesystem whose paths are relative to ``root`` (see the module docstring)."""
    return pafs.PyFileSystem(StorageFiles(root))


class StorageFiles(pafs.FileSystemHandler):
    """The pyarrow handler of `storage_filesystem`: paths relative to ``root``, each checked to stay below it."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StorageFiles) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def get_type_name(self) -> str:
        return "mds-storage"

    def equals(self, other: Any) -> bool:
        return self == other

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    def _url(self, path: str) -> str:
        relative = path.strip("/")
        if not relative:
            return self.root
        return join_url(self.root, check_relative_path(relative, f"table {self.root}", "file path"))

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        found = []
        for path in paths:
            relative = path.strip("/")
            if not relative:
                found.append(pafs.FileInfo("", pafs.FileType.Directory))
                continue
            try:
                size = storage_for(self.root).size(self._url(relative))
            except ObjectNotFoundError:
                found.append(pafs.FileInfo(relative, pafs.FileType.NotFound))
            else:
                found.append(pafs.FileInfo(relative, pafs.FileType.File, size=size))
        return found

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        urls = storage_for(self.root).list(self._url(base) + "/")
        if not urls and not selector.allow_not_found:
            raise FileNotFoundError(self._url(base))
        found: dict[str, pafs.FileInfo] = {}
        for url in urls:
            relative = relative_to(url, self.root)
            below = relative[len(base) + 1 :] if base else relative
            if "/" in below and not selector.recursive:
                folder = relative[: len(relative) - len(below)] + below.split("/")[0]
                found.setdefault(folder, pafs.FileInfo(folder, pafs.FileType.Directory))
                continue
            found[relative] = pafs.FileInfo(relative, pafs.FileType.File)
        return list(found.values())

    def open_input_file(self, path: str) -> pa.NativeFile:
        # A scratch folder, so that a download a SIGKILL interrupts is swept by the next process.
        with scratch("mds-table-file-") as folder:
            local = os.path.join(folder, "file")
            storage_for(self.root).get(self._url(path), local, durable=False)
            return pa.OSFile(local, "r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    # A table's reader writes nothing.
    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise PermissionError(f"{self.root} is opened read-only here")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only
