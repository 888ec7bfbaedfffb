"""The files of a local table (Delta), read only as regular files inside the table, reached without a link.

A Delta table's log names its data files, deletion vectors and checkpoints by paths relative to the table;
delta-rs and the JVM open them through object stores that follow links. In a folder others can write, a data
file replaced by a link to a file only the reader may read would copy that file's rows into the output. So:

* `table_filesystem` is a pyarrow filesystem over a local table whose every open goes through
  `streaming.storage.local_tree.LocalTree` (each folder and the file itself opened with ``O_NOFOLLOW``, the
  file checked to be regular) and hands pyarrow that already-opened descriptor: a link swapped in at any
  moment is refused, never followed. Everything the package reads of a local Delta table itself (log, checkpoints,
  data files, deletion vectors) goes through it.
* `check_table_files` refuses, before any row is read, a data file delta-rs lists that is not such a file.
* `refuse_links_in` refuses a local table whose tree holds a link, for readers that open files by path
  themselves (Spark's); what such a reader opens after the check is its own.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from pyarrow import fs as pafs

from streaming.storage.local_tree import LocalTree
from streaming.storage.untrusted_text import shown
from streaming.storage.url import UnsafePathError, is_remote

#: Where the running process's open descriptors can be opened again as paths (Linux).
_FD_FOLDER = "/proc/self/fd"


def check_table_files(table: str, files: Iterable[str]) -> None:
    """Refuse the files ``files`` (paths or ``file://`` URIs, as delta-rs lists them) of the local table ``table``
    unless each is a regular file inside it reached without a link (`UnsafePathError` naming it). A remote table
    is left to its store, which has no links."""
    if is_remote(table):
        return
    tree = LocalTree(os.path.realpath(_local(table)))  # the table's own path, as its owner named it
    for name in files:
        try:
            fd, _ = tree.open_file(_inside(table, name))
        except FileNotFoundError:
            continue  # gone (a VACUUM): no link to follow; the read that needs it says so
        os.close(fd)


def refuse_links_in(table: str) -> None:
    """Refuse the local table ``table`` when any entry below it is a symlink (`UnsafePathError` naming it),
    listed folder by folder from descriptors without following a link. A remote table has no links."""
    if is_remote(table):
        return
    tree = LocalTree(os.path.realpath(_local(table)))
    for relative in tree.walk():
        info = tree.stat(relative)
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise UnsafePathError(
                f"The Delta table {shown(table)} holds the symlink {shown(tree.path(relative))}: refusing to read "
                f"the table, since its reader would follow it (it could point outside the table); replace it with "
                f"the real file."
            )


def table_filesystem(table: str) -> pafs.FileSystem | None:
    """A pyarrow filesystem rooted at the local table ``table`` that opens only regular files inside it without
    following a link (see the module's docstring); None for a remote table (a ``/Volumes/...`` path not mounted
    here included: the Databricks Files API serves it)."""
    from streaming.storage.local import LocalStorage
    from streaming.storage.registry import storage_for

    if is_remote(table) or not isinstance(storage_for(table), LocalStorage):
        return None
    return pafs.PyFileSystem(NoLinkFiles(os.path.realpath(_local(table))))


def inside_path(table: str, name: str) -> str:
    """The ``/``-separated path inside ``table`` of a file the table's log names (a relative, URL-encoded path or
    a ``file://`` URI); `UnsafePathError` for one outside the table."""
    return _inside(table, name)


class NoLinkFiles(pafs.FileSystemHandler):
    """A read-only pyarrow filesystem handler over `LocalTree` ``root``: paths are relative to the root."""

    def __init__(self, root: str) -> None:
        self.tree = LocalTree(root)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NoLinkFiles) and other.tree.root == self.tree.root

    def __hash__(self) -> int:
        return hash(self.tree.root)

    def get_type_name(self) -> str:
        return "mds-no-link"

    def equals(self, other: Any) -> bool:
        return self == other

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [
            self._info(path.strip("/"), self.tree.stat(path.strip("/")) if path.strip("/") else None) for path in paths
        ]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        try:
            with self.tree.folder(base) as fd:
                names = sorted(os.listdir(fd))
        except (FileNotFoundError, NotADirectoryError):
            if selector.allow_not_found:
                return []
            raise FileNotFoundError(self.tree.path(base)) from None
        found = []
        for name in names:
            relative = f"{base}/{name}" if base else name
            info = self._info(relative, self.tree.stat(relative))
            found.append(info)
            if selector.recursive and info.type == pafs.FileType.Directory:
                found.extend(self.get_file_info_selector(pafs.FileSelector(relative, recursive=True)))
        return found

    def open_input_file(self, path: str) -> pa.NativeFile:
        fd, _ = self.tree.open_file(path.strip("/"))
        try:
            if os.path.isdir(_FD_FOLDER):
                # The descriptor's own file, reopened through /proc: a link swapped in since cannot change it.
                return pa.OSFile(f"{_FD_FOLDER}/{fd}", "r")
            return pa.PythonFile(os.fdopen(os.dup(fd), "rb"), mode="r")
        finally:
            os.close(fd)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def _info(self, relative: str, info: os.stat_result | None) -> pafs.FileInfo:
        if not relative:
            return pafs.FileInfo("", pafs.FileType.Directory)
        if info is None:
            return pafs.FileInfo(relative, pafs.FileType.NotFound)
        if stat.S_ISDIR(info.st_mode):
            return pafs.FileInfo(relative, pafs.FileType.Directory, mtime_ns=info.st_mtime_ns)
        kind = pafs.FileType.File if stat.S_ISREG(info.st_mode) else pafs.FileType.Unknown  # a link is not a file
        return pafs.FileInfo(relative, kind, size=info.st_size, mtime_ns=info.st_mtime_ns)

    # A table's reader writes nothing.
    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise PermissionError(f"{self.tree.root} is opened read-only here")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = _read_only
    move = copy_file = open_output_stream = open_append_stream = _read_only


def _inside(table: str, name: str) -> str:
    path = os.path.abspath(_local(name)) if name.startswith("file://") or os.path.isabs(name) else None
    root = os.path.abspath(_local(table))
    if path is None:
        if "://" in name:
            raise UnsafePathError(
                f"The Delta table {shown(table)} names the data file {shown(name)}, which is outside the table."
            )
        path = os.path.abspath(os.path.join(root, unquote(name)))
    relative = os.path.relpath(path, root)
    if relative == os.curdir or relative == os.pardir or relative.startswith(os.pardir + os.sep):
        raise UnsafePathError(
            f"The Delta table {shown(table)} names the data file {shown(path)}, which is outside the table."
        )
    return relative.replace(os.sep, "/")


def _local(name: str) -> str:
    return unquote(urlsplit(name).path) if name.startswith("file://") else name
