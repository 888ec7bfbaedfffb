"""The binary form of a `ShardTable`: one file of aligned arrays that any number of processes map read-only.

Decoding ``index.json`` costs time and memory in proportion to the whole index (an index of a million shards is
~280 MB of JSON and ~3 s here); a mapped table costs a few system calls, and each process holds in memory only
the pages it reads. Layout (little-endian):

* 8-byte magic ``MDSTABLE``, ``uint32`` layout version, ``uint32`` zero, ``uint64`` header length;
* the header: JSON with the identity of the index the table was decoded from (``index``, the caller's digest of
  its path and version), the shard count, the distinct settings (``configs``) and, per array, its name, numpy
  dtype, byte offset and length (in elements);
* the arrays, from the first 64-byte boundary after the header, each at a 64-byte-aligned offset (the header
  states offsets from that boundary).

Only numbers and fixed-width strings are stored: nothing in the file is ever unpickled, and a file that is
short or longer than its arrays, states an array that does not fit in it, or names another index than the one
the caller asks for, is refused (`TableFileError`): a table file put in place of another's never stands in
for it.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from typing import Any, BinaryIO

import numpy as np

from streaming.format.index import FILE_KEYS
from streaming.format.table import FileColumn, ShardTable

MAGIC = b"MDSTABLE"
LAYOUT_VERSION = 2
_PREFIX = struct.Struct("<8sIIQ")
_ALIGN = 64
#: The largest header accepted: settings are repeated once per distinct value, never per shard.
MAX_HEADER_BYTES = 64 << 20
_TABLE_ARRAYS = ("samples", "raw_bytes", "zip_bytes", "config_ids")
#: The dtype of every numeric array; the others are text (file names) or bytes (undecoded digests).
_NUMBERS = {"config_ids": "<i4", "samples": "<i8", "raw_bytes": "<i8", "zip_bytes": "<i8", "sizes": "<i8"}
_COLUMN_ARRAYS = ("names", "sizes", "hashes")


class TableFileError(ValueError):
    """A table file that is not one this module wrote (or is cut short)."""


def _arrays(table: ShardTable) -> dict[str, np.ndarray]:
    arrays = {name: getattr(table, name) for name in _TABLE_ARRAYS}
    for kind, column in table.files.items():
        if column is not None:
            arrays.update({f"{kind}.{part}": getattr(column, part) for part in _COLUMN_ARRAYS})
    return arrays


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def write_table(table: ShardTable, sink: BinaryIO, identity: str = "") -> None:
    """Write ``table``, decoded from the index ``identity`` names, to ``sink`` (a new file opened for binary
    writing, at its start)."""
    arrays = {name: np.ascontiguousarray(array) for name, array in _arrays(table).items()}
    entries, offset = [], 0
    for name, array in arrays.items():
        entries.append([name, array.dtype.str, offset, len(array)])
        offset = _aligned(offset + array.nbytes)
    header = json.dumps({"index": identity, "count": len(table), "configs": table.configs, "arrays": entries}).encode()
    sink.write(_PREFIX.pack(MAGIC, LAYOUT_VERSION, 0, len(header)))
    sink.write(header)
    data_start = _aligned(_PREFIX.size + len(header))
    for (_, _, start, _), array in zip(entries, arrays.values()):
        sink.write(b"\0" * (data_start + start - sink.tell()))
        sink.write(array.reshape(-1).view(np.uint8).data)


def map_table(fd: int, shown: str, identity: str = "") -> ShardTable:
    """The table of the index ``identity`` names in the open file ``fd``, its arrays read-only views of a private
    mapping (``shown`` names the file in errors). The mapping lives as long as any of the arrays."""
    size = os.fstat(fd).st_size
    if size < _PREFIX.size:
        raise TableFileError(f"Shard table file {shown} is too short ({size} bytes).")
    buffer = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    magic, version, _, header_length = _PREFIX.unpack_from(buffer)
    if magic != MAGIC or version != LAYOUT_VERSION:
        raise TableFileError(f"Shard table file {shown} is not a version-{LAYOUT_VERSION} table file.")
    if header_length > min(MAX_HEADER_BYTES, size - _PREFIX.size):
        raise TableFileError(f"Shard table file {shown} states a header of {header_length} bytes; it is cut short.")
    try:
        header = json.loads(buffer[_PREFIX.size : _PREFIX.size + header_length])
        if header["index"] != identity:
            raise TableFileError(f"Shard table file {shown} is the table of another index; not using it.")
        count, configs, entries = int(header["count"]), header["configs"], header["arrays"]
        data_start = _aligned(_PREFIX.size + header_length)
        arrays = {
            name: _view(buffer, name, dtype, data_start + offset, length, count, shown)
            for name, dtype, offset, length in entries
        }
        end = max((data_start + offset + arrays[name].nbytes for name, _, offset, _ in entries), default=data_start)
        samples, raw_bytes, zip_bytes, config_ids = (arrays.pop(name) for name in _TABLE_ARRAYS)
        table = ShardTable(
            samples,
            raw_bytes,
            zip_bytes,
            config_ids,
            configs=configs,
            files={kind: _column(arrays, kind) for kind in FILE_KEYS},
        )
        if arrays:
            raise TableFileError(f"Shard table file {shown} holds arrays this module never writes: {sorted(arrays)}.")
        if end != size:
            raise TableFileError(f"Shard table file {shown} holds {size} bytes where its arrays end at {end}.")
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, TableFileError):
            raise
        raise TableFileError(f"Shard table file {shown} has an invalid header: {err}") from None
    if count and not 0 <= int(table.config_ids.min()) <= int(table.config_ids.max()) < len(configs):
        raise TableFileError(f"Shard table file {shown} refers to settings it does not hold.")
    return table


def _view(buffer: mmap.mmap, name: str, dtype: str, offset: int, length: int, count: int, shown: str) -> np.ndarray:
    kind = np.dtype(dtype)
    numeric = _NUMBERS.get(name.rpartition(".")[2])
    wrong_kind = kind.str != numeric if numeric else kind.kind not in "SU"
    if wrong_kind or length != count or offset % _ALIGN:
        raise TableFileError(f"Shard table file {shown} states an array {name!r} this module never writes.")
    if offset + kind.itemsize * length > len(buffer):
        raise TableFileError(f"Shard table file {shown} is cut short: array {name!r} does not fit in it.")
    return np.frombuffer(buffer, kind, length, offset)


def _column(arrays: dict[str, Any], kind: str) -> FileColumn | None:
    parts = [arrays.pop(f"{kind}.{part}", None) for part in _COLUMN_ARRAYS]
    if all(part is None for part in parts):
        return None
    if any(part is None for part in parts):
        raise ValueError(f"file column {kind!r} is incomplete")
    return FileColumn(*parts)
