"""The files a local table's log names, checked to be regular files inside the table reached without a link.

A Delta table's log names its data files by paths relative to the table (or absolute ones); delta-rs opens them
through an object store that follows links. In a folder others can write, a data file replaced by a link to a
file only the reader may read would copy that file's rows into the output. `check_table_files` opens each named
file component by component without following a link (`streaming.storage.local_tree.LocalTree`), as local
dataset trees are read, and refuses a link, a non-regular file or a path outside the table before any is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from streaming.storage.local_tree import LocalTree
from streaming.storage.url import UnsafePathError, is_remote


def check_table_files(table: str, files: Iterable[str]) -> None:
    """Refuse the files ``files`` (paths or ``file://`` URIs, as delta-rs lists them) of the local table ``table``
    unless each is a regular file inside it reached without a link (`UnsafePathError` naming it). A remote table
    is left to its store, which has no links."""
    if is_remote(table):
        return
    root = os.path.realpath(_local(table))  # the table's own path, as its owner named it
    tree = LocalTree(root)
    for name in files:
        path = os.path.abspath(_local(name))
        relative = os.path.relpath(path, os.path.abspath(_local(table)))
        if relative == os.curdir or relative.startswith(os.pardir + os.sep) or relative == os.pardir:
            raise UnsafePathError(f"The Delta table {table} names the data file {path}, which is outside the table.")
        try:
            fd, _ = tree.open_file(relative.replace(os.sep, "/"))
        except FileNotFoundError:
            continue  # gone (a VACUUM): no link to follow; the read that needs it says so
        os.close(fd)


def _local(name: str) -> str:
    return unquote(urlsplit(name).path) if name.startswith("file://") else name
