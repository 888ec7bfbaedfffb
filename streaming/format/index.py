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
import re
from typing import Any, NamedTuple, overload

from streaming.format.safe_files import create_temp, publish_in
from streaming.storage.dataset_root import MAX_SMALL_FILE, DatasetRoot
from streaming.storage.local import LocalStorage, local_path
from streaming.storage.registry import storage_for
from streaming.storage.scratch import scratch
from streaming.storage.url import check_relative_path, join_url

INDEX_VERSION = 2
INDEX_BASENAME = "index.json"
#: The largest ``index.json`` read (an index of a million shards is a few hundred MB).
MAX_INDEX_BYTES = MAX_SMALL_FILE
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


def publish_index(location: str, shards: list[dict[str, Any]], *, folder: int | None = None) -> str:
    """Make ``shards`` the index of the dataset at ``location`` (a local directory or a URL) in one atomic step.

    On a filesystem the text goes to a temporary file that is fsynced and renamed over ``index.json``; on an
    object store it is a single PUT of the whole object. Either way a reader sees the old index or the new
    one, never a part. Returns the index's path or URL.

    This is the only place an index becomes visible, so the compare-and-swap of concurrent writers (a
    precondition on the index the caller read: S3 ``If-Match``/``If-None-Match``, GCS generations, ETags,
    create-only puts, ``O_EXCL`` on a filesystem) belongs here, as a keyword argument of this function.

    ``folder``: a descriptor of the local ``location`` (a writer's), to write through instead of its path.
    """
    text = dumps_index(shards)
    url = join_url(location, INDEX_BASENAME)
    storage = storage_for(url)
    if not isinstance(storage, LocalStorage):
        with scratch("mds-index-") as staging:
            path = os.path.join(staging, INDEX_BASENAME)
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            storage.put(path, url)
        return url
    path = local_path(url)
    if folder is not None:
        publish_in(folder, INDEX_BASENAME, text.encode("utf-8"))
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = create_temp(path, 0o666)
    with open(fd, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return path


def check_basename(basename: str, where: str) -> str:
    """Reject a shard file name that would escape its dataset directory (the one rule: `check_relative_path`)."""
    return check_relative_path(basename, where, "shard basename")


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
        check_shard_entry(shard, where, number)
    return obj["shards"]


def check_shard_entry(shard: Any, where: str, number: int) -> None:
    """Validate one shard entry of an index (or of a commit) as readers rely on it; ``where`` names the file.

    Its version, sample count, file names and sizes, its ``format`` (a name, not any JSON value), and that
    its files can hold that many samples (`check_capacity`).
    """
    if not isinstance(shard, dict):
        raise ValueError(f"Index file at {where}: shard {number} is not an object.")
    check_version(shard.get("version"), where, number)
    samples: int = shard.get("samples")  # type: ignore[assignment]  # checked on the next line
    _check_count(samples, where, number, "samples")
    shard_format = check_format(shard.get("format"), where, number)
    for key in FILE_KEYS:
        info = shard.get(key)
        if info is not None:
            check_file_name(info.get("basename") if isinstance(info, dict) else None, where, number, key)
            _check_count(info.get("bytes"), where, number, f"{key}.bytes")
    data = shard.get(RAW_DATA)
    if isinstance(data, dict):  # an entry without one is refused by its reader
        meta = shard.get(RAW_META)
        meta_bytes = meta["bytes"] if isinstance(meta, dict) else None
        check_capacity(shard_format, shard.get("column_sizes"), samples, data["bytes"], meta_bytes, where, number)


def check_format(shard_format: Any, where: str, number: int) -> Any:
    """Refuse a ``format`` that is not a name (``["mds"]``); an unknown name is its reader lookup's to refuse."""
    if shard_format is not None and type(shard_format) is not str:
        raise ValueError(
            f"Index file at {where}, shard {number}: format must be the name of a shard format (such as 'mds'), "
            f"got {shard_format!r}."
        )
    return shard_format


#: The largest shard file the format can describe: sample offsets are uint32.
MAX_SHARD_FILE_BYTES = (1 << 32) - 1
#: The formats whose samples are lines of a data file (at least a newline each), indexed by a ``.meta`` file.
LINE_FORMATS = frozenset({"json", "csv", "tsv", "xsv"})


def min_sample_bytes(shard_format: Any, column_sizes: Any) -> int:
    """The fewest bytes one sample takes in its shard's data file, by the entry's own settings.

    MDS: each column's fixed size, or its 4-byte length for a variable-size column. The line formats: a
    newline. Unknown settings count 0 (their reader refuses them later).
    """
    if shard_format == "mds":
        if not isinstance(column_sizes, list):
            return 0
        return sum(size if type(size) is int and size >= 0 else 4 if size is None else 0 for size in column_sizes)
    return 1 if shard_format in LINE_FORMATS else 0


def check_capacity(
    shard_format: Any,
    column_sizes: Any,
    samples: int,
    data_bytes: int,
    meta_bytes: int | None,
    where: str,
    number: int,
) -> None:
    """Refuse a sample count or file size that a shard cannot have, before anything is planned for it.

    Offsets are uint32, so no raw file reaches 4 GiB. An MDS data file holds its count, ``samples + 1``
    offsets and every sample (at least `min_sample_bytes` each); a line format's ``.meta`` file holds the
    count and offsets, and its data file a line per sample.
    """
    if data_bytes > MAX_SHARD_FILE_BYTES or (meta_bytes or 0) > MAX_SHARD_FILE_BYTES:
        raise ValueError(
            f"Index file at {where}, shard {number}: a raw shard file of {max(data_bytes, meta_bytes or 0)} bytes "
            f"is impossible (offsets are 32-bit, so shard files stay under 4 GiB); the index is corrupt."
        )
    table = 4 * (samples + 2)  # the count, then samples + 1 offsets
    if shard_format in LINE_FORMATS and meta_bytes is not None:
        need, have, name = table, meta_bytes, RAW_META
        if samples > data_bytes:
            need, have, name = samples, data_bytes, RAW_DATA
    else:
        need, have, name = table + samples * min_sample_bytes(shard_format, column_sizes), data_bytes, RAW_DATA
    if need > have:
        raise ValueError(
            f"Index file at {where}, shard {number}: {samples} samples cannot fit in {have} bytes of its {name} "
            f"(they need at least {need}); the index is corrupt."
        )


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
