"""`index.json` version 2: file-info records, writing with upstream's exact bytes, and safe loading."""

from __future__ import annotations

import json
import os
import posixpath
from typing import Any, NamedTuple

INDEX_VERSION = 2
_INDEX_BASENAME = "index.json"


def get_index_basename() -> str:
    """The name of the index file in every dataset directory."""
    return _INDEX_BASENAME


class FileInfo(NamedTuple):
    """One file of a shard as the index describes it: its path relative to the dataset, size and digests."""

    basename: str
    bytes: int
    hashes: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"basename": self.basename, "bytes": self.bytes, "hashes": self.hashes}

    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> FileInfo | None:
        if obj is None:
            return None
        return cls(obj["basename"], obj["bytes"], obj.get("hashes") or {})


def dumps_index(shards: list[dict[str, Any]]) -> str:
    """Serialise an index exactly as MosaicML Streaming's writers do (one line, sorted keys, default separators)."""
    return json.dumps({"shards": shards, "version": INDEX_VERSION}, sort_keys=True)


def write_index(dirname: str, shards: list[dict[str, Any]], basename: str = _INDEX_BASENAME) -> str:
    """Write ``index.json`` atomically (temp file, fsync, rename) and return its path."""
    path = os.path.join(dirname, basename)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(dumps_index(shards))
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


_FILE_KEYS = ("raw_data", "zip_data", "raw_meta", "zip_meta")


def parse_index(text: str | bytes, where: str) -> list[dict[str, Any]]:
    """Parse and validate index text; ``where`` (a path or URL) is named in every error."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise json.JSONDecodeError(
            f"Index file at {where} is empty or corrupted. {err.msg}", err.doc, err.pos
        ) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("shards"), list):
        raise ValueError(f"Index file at {where} is not a streaming index: expected an object with a 'shards' list.")
    if obj.get("version") != INDEX_VERSION:
        raise ValueError(
            f"Unsupported streaming data version {obj.get('version')!r} in {where}: "
            f"this package reads index version {INDEX_VERSION}."
        )
    for number, shard in enumerate(obj["shards"]):
        if not isinstance(shard, dict):
            raise ValueError(f"Index file at {where}: shard {number} is not an object.")
        if shard.get("version") != INDEX_VERSION:
            raise ValueError(
                f"Unsupported streaming data version {shard.get('version')!r} for shard {number} "
                f"in {where}: this package reads version {INDEX_VERSION}."
            )
        for key in _FILE_KEYS:
            info = shard.get(key)
            if info is not None:
                check_basename(
                    info.get("basename") if isinstance(info, dict) else None,
                    f"Index file at {where}, shard {number}, {key}",
                )
    return obj["shards"]


def load_index(path: str) -> list[dict[str, Any]]:
    """Read and validate a local ``index.json``, returning its shard entries."""
    with open(path, "rb") as f:
        return parse_index(f.read(), path)
