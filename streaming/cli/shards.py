"""What shard files say about themselves: the header of an MDS file and of a JSON/XSV `.meta` file.

An MDS data file starts with its sample count (uint32), `count + 1` uint32 sample offsets, then the writer's
settings as JSON (format, compression, hashes, size_limit, column names, encodings and sizes) up to the first
sample. A JSON/XSV `.meta` file holds the same count and offsets (into the data file) followed by the same
kind of JSON settings. `verify` compares these headers with the index; `rebuild-index` builds the index
from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from streaming.format.errors import ShardCorruptError
from streaming.format.index import SETTINGS_KEYS

# What a header records: the version and the index entry's settings.
CONFIG_KEYS = ("version", *SETTINGS_KEYS)


@dataclass
class Header:
    """The parsed start of a shard's offsets file (the MDS data file, or a `.meta` file)."""

    samples: int
    offsets: np.ndarray
    config: dict[str, Any] | None
    config_error: str | None


def parse_header(data: bytes, name: str, *, meta: bool, size: int | None = None) -> Header:
    """Parse an MDS data file (`meta=False`) or a `.meta` file; ShardCorruptError when the offsets are unusable.

    ``data`` may be only the head of an MDS data file (its offsets and settings) when ``size`` gives the
    whole file's length.
    """
    size = len(data) if size is None else size
    if len(data) < 8:
        raise ShardCorruptError(f"{name} is {len(data)} bytes: too short to hold a shard header (truncated?).")
    count = int.from_bytes(data[:4], "little")
    table_end = 4 + 4 * (count + 1)
    if table_end > len(data):
        raise ShardCorruptError(
            f"{name} says it holds {count} samples, but its {len(data)} bytes cannot hold their offsets (truncated?)."
        )
    offsets = np.frombuffer(data, "<u4", count + 1, 4).astype(np.int64)
    if np.any(np.diff(offsets) < 0):
        raise ShardCorruptError(f"{name}: its sample offsets are not increasing: the file is corrupt.")
    config_end = len(data) if meta else int(offsets[0])
    if not meta and (config_end < table_end or config_end > len(data) or int(offsets[-1]) != size):
        raise ShardCorruptError(
            f"{name} is {size} bytes but its offsets say {int(offsets[-1])}: it is truncated or was replaced."
        )
    config: dict[str, Any] | None = None
    error = None
    try:
        parsed = json.loads(bytes(data[table_end:config_end]))
        if isinstance(parsed, dict):
            config = parsed
        else:
            error = "its settings are not a JSON object"
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        error = f"its settings are not readable JSON ({err})"
    return Header(count, offsets, config, error)


def header_mismatches(header: Header, shard: dict[str, Any]) -> list[str]:
    """How a shard's header disagrees with its index entry (empty when they agree)."""
    found = []
    if header.samples != shard.get("samples"):
        found.append(f"header says {header.samples} samples, index says {shard.get('samples')}")
    if header.config is None:
        found.append(header.config_error or "no settings in the header")
        return found
    for key in CONFIG_KEYS:
        if key in header.config and header.config.get(key) != shard.get(key):
            found.append(f"header has {key}={header.config.get(key)!r}, index has {shard.get(key)!r}")
    return found
