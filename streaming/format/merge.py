"""`merge_index`: combine the `index.json` files of sub-datasets into one index at their common root.

Two forms, as upstream:
* `merge_index(index_file_urls, out, keep_local=True, download_timeout=60)`: a list of index files (URLs,
  local paths, or `(local, remote)` pairs, of which the local copy is read when it exists);
* `merge_index(out, keep_local=True, download_timeout=60)`: every `index.json` below the root `out`.

Each shard's file names are prefixed with the sub-dataset's full path relative to the root, so nested
folders (`part-1/train/index.json`) keep every level (upstream #516 kept only the last one). Every scheme
that `storage_for` serves works, local or remote. The merged index is published with `publish_index`.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from typing import Any, cast

from streaming.format.index import INDEX_BASENAME, MAX_INDEX_BYTES, parse_index, publish_index, rebase
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.download import download_file
from streaming.storage.errors import ObjectNotFoundError
from streaming.storage.local import local_path
from streaming.storage.local_tree import LocalTree
from streaming.storage.out_argument import parse_out
from streaming.storage.scratch import scratch
from streaming.storage.url import check_relative_path, is_remote, join_url, relative_to

Source = str | tuple[str, str]


class IndexNotFoundError(FileNotFoundError, RuntimeError):
    """A sub-dataset's index.json that is not there (also the RuntimeError upstream raised)."""


def merge_index(*args: Any, **kwargs: Any) -> None:
    """Merge sub-dataset indexes into `out`; see the module docstring for the two call forms."""
    first = args[0] if args else kwargs.get("index_file_urls", kwargs.get("out"))
    if isinstance(first, list) and 2 <= len(args) + len(kwargs) <= 4:
        _merge_from_list(*args, **kwargs)
    elif isinstance(first, (str, tuple)) and 1 <= len(args) + len(kwargs) <= 3:
        _merge_from_root(*args, **kwargs)
    else:
        raise ValueError(
            "Invalid arguments to merge_index: call merge_index(index_file_urls: list, out, "
            "keep_local=True, download_timeout=60) or merge_index(out: str | tuple, keep_local=True, "
            f"download_timeout=60); got positional {args!r} and keywords {sorted(kwargs)}."
        )


def _index_file(url: str) -> str:
    return url if url.endswith(".json") else join_url(url, INDEX_BASENAME)


def _sub_path(index_url: str, root: str | None) -> str | None:
    """The folder of `index_url` relative to `root`, or None when it is not below it."""
    if root is None:
        return None
    folder = index_url.rsplit("/", 1)[0] if is_remote(index_url) else os.path.dirname(index_url)
    try:
        relative = relative_to(folder, root.rstrip("/") if is_remote(root) else os.path.abspath(root))
    except ValueError:
        return None
    return None if relative.startswith("..") else relative


def _read_local(path: str, local_root: str | None) -> bytes:
    """A local index file's bytes: a regular file (no link, no FIFO, at most `MAX_INDEX_BYTES`), reached from
    the merge's root without following a link below it when it lies there (else from its own folder)."""
    path = os.path.abspath(local_path(path))
    root = os.path.abspath(local_path(local_root)) if local_root is not None else None
    if root is None or not path.startswith(root.rstrip(os.sep) + os.sep):
        root = os.path.dirname(path)
    return LocalTree(root).read_bytes(os.path.relpath(path, root).replace(os.sep, "/"), MAX_INDEX_BYTES)


def _read_index(
    source: Source, work_dir: str, number: int, timeout: float, roots: tuple[str | None, str | None] = (None, None)
) -> list[dict[str, Any]]:
    """One sub-index, checked; a local copy (or a local "remote") is read from its root (see `_read_local`)."""
    local, remote = source if isinstance(source, tuple) else (source, source)
    local_root, remote_root = roots
    if local and not is_remote(local) and os.path.lexists(local):
        where, data = local, _read_local(local, local_root)
    elif remote and not is_remote(remote):
        try:
            where, data = remote, _read_local(remote, remote_root)
        except FileNotFoundError as err:  # a local "remote" is fetched like any other: upstream's error
            raise IndexNotFoundError(f"Failed to download index.json: {remote} does not exist ({err}).") from err
    elif remote:
        path = os.path.join(work_dir, f"{number}.json")
        try:
            download_file(remote, path, timeout=timeout, max_bytes=MAX_INDEX_BYTES)
        except ObjectNotFoundError as err:
            raise IndexNotFoundError(f"Failed to download index.json: {err}") from err
        with open(path, "rb") as stream:
            where, data = remote, stream.read()
    else:
        raise FileNotFoundError(
            f"Check data availability! Index file not found: {local!r} (and no remote copy was given)."
        )
    return parse_index(data, where)


def _prefix_for(source: Source, local_root: str | None, remote_root: str | None) -> str:
    local, remote = source if isinstance(source, tuple) else (source, source)
    candidates = []
    if remote and is_remote(remote):
        candidates.append(_sub_path(remote, remote_root))
    if local and not is_remote(local):
        candidates.append(_sub_path(os.path.abspath(local), local_root))
    for candidate in candidates:
        if candidate is not None:
            return "" if candidate == "." else candidate
    any_path = remote or local
    return posixpath.basename(posixpath.dirname(any_path.replace(os.sep, "/")))


def _merge_from_list(
    index_file_urls: list[Source], out: str | tuple[str, str], keep_local: bool = True, download_timeout: float = 60
) -> None:
    local_root, remote_root = parse_out(out)
    sources: list[Source] = []
    for entry in index_file_urls:
        if isinstance(entry, (tuple, list)):
            # tuple() of a (local, remote) pair is a pair; mypy only sees tuple[str, ...].
            normalized: Source = cast(Source, tuple(_index_file(part.rstrip("/")) if part else "" for part in entry))
        else:
            normalized = _index_file(entry.rstrip("/"))
        if normalized not in sources:
            sources.append(normalized)
    shards: list[dict[str, Any]] = []
    with scratch("mds-merge-") as work_dir:
        for number, source in enumerate(sources):
            prefix = _prefix_for(source, local_root, remote_root)
            if prefix:  # the merged basenames must stay inside the root, as every index's do
                check_relative_path(prefix, f"merge input {source}", "sub-dataset folder")
            entries = _read_index(source, work_dir, number, download_timeout, (local_root, remote_root))
            shards.extend(rebase(shard, prefix) for shard in entries)
    if local_root is not None:
        publish_index(local_root, shards)
    if remote_root is not None:
        publish_index(remote_root, shards)
        if local_root is not None and not keep_local:
            shutil.rmtree(local_root, ignore_errors=True)


def _merge_from_root(out: str | tuple[str, str], keep_local: bool = True, download_timeout: float = 60) -> None:
    local_root, remote_root = parse_out(out)
    found: dict[str, Source] = {}
    # Listings are checked as index basenames are; a local root is walked without entering a linked folder,
    # and an index.json that is a link is refused when read.
    if remote_root is not None:
        root = DatasetRoot(remote_root)
        for relative in root.list_relative():
            if posixpath.basename(relative) == INDEX_BASENAME and relative != INDEX_BASENAME:
                found[relative] = ("", root.child(relative))
    if local_root is not None and os.path.isdir(local_root):
        for relative in LocalTree(local_root).walk():
            if posixpath.basename(relative) == INDEX_BASENAME and relative != INDEX_BASENAME:
                path = os.path.join(local_root, *relative.split("/"))
                found[relative] = (path, found.get(relative, ("", ""))[1])
    sources = [found[relative] for relative in sorted(found)]
    _merge_from_list(sources, out, keep_local=keep_local, download_timeout=download_timeout)
