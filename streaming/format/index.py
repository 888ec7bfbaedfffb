"""The owner of the ``index.json`` schema (version 2): its names, its validation and its one publish step.

Everything that reads, writes, merges or commits an index goes through this module: the file-key names of
a shard entry (`RAW_DATA`, `ZIP_DATA`, `RAW_META`, `ZIP_META`), the version, the file name, `shard_files`
and `stored_file` to walk an entry's files, `rebase` to move an entry under a folder, the checks every
reader applies (`check_version`, `check_file_name`), and `publish_index`, the single atomic step that makes a
dataset's index visible, used by every writer, by `merge_index` and by the Spark commit.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import tempfile
from typing import Any, NamedTuple, overload

from streaming.format.safe_files import create_temp
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.local import LocalStorage, local_path
from streaming.storage.registry import storage_for
from streaming.storage.url import join_url

INDEX_VERSION = 2
INDEX_BASENAME = "index.json"
#: The conversion record beside the index (source, Delta version per run); copied and kept with the dataset.
METADATA_BASENAME = "mds_conversion.json"

RAW_DATA = "raw_data"
ZIP_DATA = "zip_data"
RAW_META = "raw_meta"
ZIP_META = "zip_meta"
#: The keys of a shard entry that hold a file record (or null), in the order readers and writers list them.
FILE_KEYS = (RAW_DATA, ZIP_DATA, RAW_META, ZIP_META)
#: The key of each raw file's compressed copy.
COMPRESSED_KEYS = {RAW_DATA: ZIP_DATA, RAW_META: ZIP_META}
#: The settings of a shard entry, which its header repeats; each format uses a subset (MDS: column sizes,
#: JSON: columns, XSV: separator).
SETTINGS_KEYS = (
    "format",
    "compression",
    "hashes",
    "size_limit",
    "column_encodings",
    "column_names",
    "column_sizes",
    "columns",
    "newline",
    "separator",
)


def get_index_basename() -> str:
    """The name of the index file in every dataset directory (upstream's accessor)."""
    return INDEX_BASENAME


class FileInfo(NamedTuple):
    """One file of a shard as the index describes it: its path relative to the dataset, size and digests."""

    basename: str
    bytes: int
    hashes: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"basename": self.basename, "bytes": self.bytes, "hashes": self.hashes}

    @overload
    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> FileInfo: ...
    @overload
    @classmethod
    def from_json(cls, obj: None) -> None: ...
    @overload
    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> FileInfo | None: ...
    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> FileInfo | None:
        if obj is None:
            return None
        return cls(obj["basename"], obj["bytes"], obj.get("hashes") or {})


def shard_files(entry: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(key, file record)`` of every file a shard entry names, raw and compressed, in `FILE_KEYS` order."""
    return [(key, info) for key in FILE_KEYS if (info := entry.get(key)) is not None]


def stored_file(entry: dict[str, Any]) -> dict[str, Any]:
    """The record of the data file a shard is stored as at its destination: compressed when it is."""
    return entry.get(ZIP_DATA) or entry[RAW_DATA]


def stored_files(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of every file a shard is stored as (meta file first, then data): compressed when it is."""
    pairs = ((RAW_META, ZIP_META), (RAW_DATA, ZIP_DATA))
    return [info for raw, zipped in pairs if (info := entry.get(zipped) or entry.get(raw)) is not None]


def rebase(entry: dict[str, Any], folder: str) -> dict[str, Any]:
    """A copy of a shard entry whose file basenames lie under ``folder`` (a ``/`` path; ``""`` changes nothing)."""
    if not folder:
        return dict(entry)
    rebased = dict(entry)
    for key, info in shard_files(entry):
        rebased[key] = {**info, "basename": f"{folder}/{info['basename']}"}
    return rebased


def dumps_index(shards: list[dict[str, Any]]) -> str:
    """Serialise an index exactly as MosaicML Streaming's writers do (one line, sorted keys, default separators)."""
    return json.dumps({"shards": shards, "version": INDEX_VERSION}, sort_keys=True)


def publish_index(location: str, shards: list[dict[str, Any]]) -> str:
    """Make ``shards`` the index of the dataset at ``location`` (a local directory or a URL) in one atomic step.

    On a filesystem the text goes to a temporary file that is fsynced and renamed over ``index.json``; on an
    object store it is a single PUT of the whole object. Either way a reader sees the old index or the new
    one, never a part. Returns the index's path or URL.

    This is the only place an index becomes visible, so the compare-and-swap of concurrent writers (a
    precondition on the index the caller read: S3 ``If-Match``/``If-None-Match``, GCS generations, ETags,
    create-only puts, ``O_EXCL`` on a filesystem) belongs here, as a keyword argument of this function.
    """
    text = dumps_index(shards)
    url = join_url(location, INDEX_BASENAME)
    storage = storage_for(url)
    if not isinstance(storage, LocalStorage):
        with tempfile.TemporaryDirectory(prefix="mds-index-") as scratch:
            path = os.path.join(scratch, INDEX_BASENAME)
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            storage.put(path, url)
        return url
    path = local_path(url)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = create_temp(path, 0o666)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return path


def check_basename(basename: str, where: str) -> str:
    """Reject a shard file name that would escape its dataset directory (absolute, ``..``, drive letters)."""
    if not isinstance(basename, str) or not basename:
        raise ValueError(f"{where}: shard basename must be a non-empty string, got {basename!r}.")
    normalized = posixpath.normpath(basename.replace("\\", "/"))
    if (
        basename.startswith(("/", "\\"))
        or ":" in basename.split("/")[0]
        or normalized.startswith("..")
        or normalized != basename
        or "\x00" in basename
    ):
        raise ValueError(
            f"{where}: shard basename {basename!r} is not a plain relative path inside the dataset "
            f"directory; refusing to read or write outside it."
        )
    return basename


#: A name that needs no closer look: no separator, colon or NUL, and not starting with a dot.
_PLAIN_NAME = re.compile(r"[^/\\:\x00.][^/\\:\x00]*\Z")


def check_file_name(basename: Any, where: str, shard: int, key: str) -> None:
    """Validate the basename of file ``key`` of shard number ``shard``; fast for the plain names writers make."""
    if type(basename) is str and _PLAIN_NAME.match(basename):
        return
    check_basename(basename, f"Index file at {where}, shard {shard}, {key}")


def check_version(version: Any, where: str, shard: int | None = None) -> None:
    """Refuse an index (``shard`` None) or a shard entry whose version this package does not read."""
    if version == INDEX_VERSION:
        return
    if shard is None:
        raise ValueError(
            f"Unsupported streaming data version: {version}. Expected version {INDEX_VERSION}. "
            f"(index file at {where}; this package reads index version {INDEX_VERSION})"
        )
    raise ValueError(
        f"Unsupported streaming data version: {version}. Expected version {INDEX_VERSION}. "
        f"(shard {shard} in {where}; this package reads version {INDEX_VERSION})"
    )


def parse_index(text: str | bytes, where: str) -> list[dict[str, Any]]:
    """Parse and validate index text; ``where`` (a path or URL) is named in every error."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise json.JSONDecodeError(
            f"Index file at {where} is empty or corrupted. {err.msg}", err.doc, err.pos
        ) from None
    # Invalid UTF-8, nesting past the recursion limit, an integer past Python's 4,300-digit conversion limit.
    except (ValueError, RecursionError) as err:
        raise json.JSONDecodeError(f"Index file at {where} is empty or corrupted. {err}", "", 0) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("shards"), list):
        raise ValueError(f"Index file at {where} is not a streaming index: expected an object with a 'shards' list.")
    check_version(obj.get("version"), where)
    for number, shard in enumerate(obj["shards"]):
        if not isinstance(shard, dict):
            raise ValueError(f"Index file at {where}: shard {number} is not an object.")
        check_version(shard.get("version"), where, number)
        _check_count(shard.get("samples"), where, number, "samples")
        for key in FILE_KEYS:
            info = shard.get(key)
            if info is not None:
                check_file_name(info.get("basename") if isinstance(info, dict) else None, where, number, key)
                _check_count(info.get("bytes"), where, number, f"{key}.bytes")
    return obj["shards"]


class MissingIndexError(FileNotFoundError):
    """A dataset root without an ``index.json``."""


def read_index(root: DatasetRoot, *, missing_ok: bool = False) -> list[dict[str, Any]]:
    """The validated shard entries of the index published at ``root``.

    Without one: ``[]`` when ``missing_ok``, else MissingIndexError saying what to check and how to rebuild it.
    """
    text = root.read_text(INDEX_BASENAME)
    if text is None:
        if missing_ok:
            return []
        raise MissingIndexError(
            f"No {INDEX_BASENAME} at {root.url}. Is this the dataset's root folder (the one holding "
            f"{INDEX_BASENAME})? If the index was lost or damaged, rebuild it from the shards: "
            f"mds-streaming rebuild-index {root.url}"
        )
    return parse_index(text, root.child(INDEX_BASENAME))


#: The largest size or count an index may state (far below what int64 arithmetic can overflow).
MAX_COUNT = (1 << 48) - 1


def _check_count(value: Any, where: str, shard: int, key: str) -> None:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise ValueError(
            f"Index file at {where}, shard {shard}: {key} must be an integer from 0 to {MAX_COUNT}, got {value!r}."
        )
