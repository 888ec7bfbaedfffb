"""The one rule for Parquet files that others can write: what they may decode to, checked from the footer first.

A Parquet file states in its footer how many rows each row group holds and how many bytes its column chunks and
row groups take decoded; a few KiB of zstd can declare millions of rows, or rows of megabytes each. Before any of
it is decoded, the declared sizes are checked against what the file's owner (a dataset, a Delta table) declares:

* `bounded_row_groups` reads a file one row group at a time, each refused past the caller's bounds (a key map of
  `streaming.convert.key_map`: rows at most the dataset's samples, bytes at most what such rows take);
* `check_checkpoint` bounds a Delta checkpoint file or V2 sidecar by itself: its actions at most one a byte, its
  decoded bytes at most its actions times what one action's fields take (a path at most `MAX_PATH_BYTES`, its
  statistics at most `MAX_STATS_BYTES`, any other field `MAX_FIELD_BYTES`) plus `FILE_ALLOWANCE`. Each file is
  compared with itself, never with a count from another version of the table (VACUUM leaves fewer files than an
  old checkpoint names).

A dictionary-encoded text column is counted as a reader materialises it: its rows times its longest dictionary
entry (read from the dictionary page, within the sizes its header declares), so one long entry repeated by every
row is counted in full. `ParquetBoundsError` names the file and the column.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


class ParquetBoundsError(ValueError):
    """A Parquet file declares more rows or bytes than what it belongs to accounts for."""


def bounded_row_groups(
    source: Any, where: str, max_rows: int, max_bytes: int, columns: Sequence[str] | None = None
) -> Iterator[pa.Table]:
    """The row groups of the Parquet file ``source`` (a path, buffer or file object), in order.

    Before anything is decoded, the footer's total rows must be at most ``max_rows`` and each row group's
    decoded bytes at most ``max_bytes`` (its column chunks' uncompressed sizes, a dictionary-encoded text column
    counted as its rows times its longest entry, and the group's own declared size); else `ParquetBoundsError`
    naming ``where``. With ``columns``, only those are read (and counted).
    """
    parquet = pq.ParquetFile(source)
    footer = parquet.metadata
    if footer.num_rows > max_rows:
        raise ParquetBoundsError(
            f"{where} declares {footer.num_rows} rows, more than the {max_rows} it may hold; it was not read."
        )
    for number in range(footer.num_row_groups):
        group = footer.row_group(number)
        size = row_group_bytes(source, group, where, columns)
        if size > max_bytes:
            raise ParquetBoundsError(
                f"{where}: row group {number} declares {size} bytes decompressed, more than the {max_bytes} its "
                f"{group.num_rows} rows may take; it was not read."
            )
        yield parquet.read_row_group(number, columns=list(columns) if columns is not None else None)


def row_group_bytes(source: Any, group: Any, where: str, columns: Sequence[str] | None = None) -> int:
    """The bytes the row group ``group`` (its footer's metadata) of the Parquet file ``source`` declares it decodes
    to: its column chunks' uncompressed sizes (a dictionary-encoded text column counted as its rows times its
    longest entry) and, when every column is read, at least the group's own declared size; with ``columns``, only
    the chunks of those top-level columns. Read from the footer and dictionary page headers only."""
    wanted = None if columns is None else set(columns)
    size = sum(
        _decoded_chunk_bytes(source, group.column(index), where)
        for index in range(group.num_columns)
        if wanted is None or group.column(index).path_in_schema.split(".")[0] in wanted
    )
    return size if wanted is not None else max(size, int(group.total_byte_size))


def declared_values(source: Any, column: str) -> int:
    """How many non-null values the Parquet file ``source`` declares for the leaf ``column`` (a dotted path, such
    as a Delta checkpoint's ``add.path``), from its footer alone: each row group's rows less its null count
    (all its rows where the writer kept no statistics, so the count never falls short)."""
    footer = pq.ParquetFile(source).metadata
    paths = [footer.schema.column(number).path for number in range(footer.num_columns)]
    if column not in paths:
        return 0
    index, total = paths.index(column), 0
    for number in range(footer.num_row_groups):
        group = footer.row_group(number)
        statistics = group.column(index).statistics
        nulls = statistics.null_count if statistics is not None and statistics.has_null_count else 0
        total += group.num_rows - nulls
    return total


#: Rows a checkpoint may declare beyond one a byte (its protocol, metadata and other fixed actions).
ROW_ALLOWANCE = 1024
#: The longest path an action may name: object stores cap a key at 1,024 bytes and local file systems a path at
#: 4,096; percent-encoding at most triples it and an absolute URI adds its scheme and bucket.
MAX_PATH_BYTES = 16 << 10
#: The most one action's statistics (a JSON text) may decode to: Delta writers keep those of 32 columns by
#: default, strings cut to 32 characters (a few KiB); this leaves room for tables that index every column.
MAX_STATS_BYTES = 1 << 20
#: The most any other field of one action may decode to (a partition value, a tag, a deletion vector's id).
MAX_FIELD_BYTES = 64 << 10
#: Decoded bytes a checkpoint file may hold past its actions' caps: what it holds once (its metadata with the
#: table's schema, its protocol).
FILE_ALLOWANCE = 64 << 20
_PATH_LEAVES = ("path", "pathOrInlineDv")


def check_checkpoint(source: Any, where: str, file_bytes: int) -> int:
    """The actions (rows) a Delta checkpoint file (or V2 sidecar) declares, once its footer is found within bounds
    (`ParquetBoundsError` naming ``where`` otherwise, before anything is decoded).

    ``source`` is the open file (a path, buffer or file object) of ``file_bytes`` bytes. Every bound compares
    the file with itself, never with another version of the table: its rows at most one a byte (plus
    `ROW_ALLOWANCE`), as every action names a file or key of its own; and the bytes its column chunks and row
    groups declare decoded (a dictionary-encoded text column counted as its rows times its longest dictionary
    entry, which is what a reader materialises) at most each column's values times the cap of that field
    (`MAX_PATH_BYTES`, `MAX_STATS_BYTES`, `MAX_FIELD_BYTES`) plus `FILE_ALLOWANCE` in all.
    """
    parquet = pq.ParquetFile(source)
    footer = parquet.metadata
    rows = int(footer.num_rows)
    if rows > file_bytes + ROW_ALLOWANCE:
        raise ParquetBoundsError(
            f"{where} declares {rows} actions in {file_bytes} bytes: more than one a byte, which no Delta writer "
            f"writes (each action names a file or key of its own); it was not read."
        )
    decoded, allowed, excess, worst = 0, FILE_ALLOWANCE, 0, ("", 0)
    per_column: dict[str, list[int]] = {}
    for number in range(footer.num_row_groups):
        group = footer.row_group(number)
        for index in range(group.num_columns):
            chunk = group.column(index)
            size = _decoded_chunk_bytes(source, chunk, where)
            totals = per_column.setdefault(chunk.path_in_schema, [0, 0])
            totals[0] += size
            totals[1] += int(chunk.num_values)
    for column, (size, values) in per_column.items():
        cap = values * _field_cap(column)
        decoded += size
        allowed += cap
        if size - cap > worst[1]:
            worst = (column, size - cap)
        excess += max(0, size - cap)
    declared = max(
        decoded, sum(int(footer.row_group(number).total_byte_size) for number in range(footer.num_row_groups))
    )
    if excess > FILE_ALLOWANCE or declared > allowed:
        raise ParquetBoundsError(
            f"{where} declares {declared} bytes decoded for {rows} actions, more than such actions take "
            f"(at most {allowed}; column {worst[0] or '-'} alone is {worst[1]} bytes past its cap); it was not read."
        )
    return rows


def _field_cap(column: str) -> int:
    """The most one value of the checkpoint column ``column`` (a dotted leaf path) may decode to."""
    parts = column.split(".")
    if any(part in _PATH_LEAVES for part in parts[1:]):
        return MAX_PATH_BYTES
    if "stats" in parts[1:]:
        return MAX_STATS_BYTES
    return MAX_FIELD_BYTES


def _decoded_chunk_bytes(source: Any, chunk: Any, where: str) -> int:
    """What the column chunk decodes to: its declared uncompressed size, or for a dictionary-encoded byte-array
    column its values times its longest dictionary entry when that is more (each row becomes a copy)."""
    size = int(chunk.total_uncompressed_size)
    if not chunk.has_dictionary_page or chunk.physical_type != "BYTE_ARRAY" or int(chunk.num_values) == 0:
        return size  # no dictionary to multiply (a chunk of no values, as pyarrow writes an empty table, has none)
    longest = _longest_dictionary_entry(source, chunk, where)
    return max(size, int(chunk.num_values) * (longest + 4))


def _longest_dictionary_entry(source: Any, chunk: Any, where: str) -> int:
    """The longest entry of the chunk's dictionary page (PLAIN byte arrays), read and decompressed within the
    sizes its page header declares, which the chunk's declared sizes bound."""
    start, end = int(chunk.dictionary_page_offset), int(chunk.data_page_offset)
    if not 0 <= start < end or end - start > int(chunk.total_compressed_size):
        raise ParquetBoundsError(f"{where}: column {chunk.path_in_schema} has a dictionary page it does not hold.")
    raw = _read_range(source, start, end - start)
    header, used = _page_header(raw, where)
    uncompressed, compressed, entries = header
    if uncompressed > min(int(chunk.total_uncompressed_size), FILE_ALLOWANCE) or used + compressed > len(raw):
        raise ParquetBoundsError(
            f"{where}: column {chunk.path_in_schema} declares a dictionary page of {uncompressed} bytes decoded, "
            f"more than the column or any dictionary of actions holds; it was not read."
        )
    body = raw[used : used + compressed]
    codec = str(chunk.compression).lower()
    if codec != "uncompressed":
        try:
            body = pa.Codec({"lz4": "lz4_raw"}.get(codec, codec)).decompress(body, uncompressed).to_pybytes()
        except (pa.ArrowException, ValueError):
            return uncompressed  # not decodable here: as if one entry filled the whole page
    longest, offset = 0, 0
    for _ in range(entries):
        if offset + 4 > len(body):
            break
        length = int.from_bytes(body[offset : offset + 4], "little")
        longest = max(longest, length)
        offset += 4 + length
    return longest


def _read_range(source: Any, start: int, length: int) -> bytes:
    """``length`` bytes of ``source`` (a path, a buffer or a seekable file object) from ``start``."""
    if isinstance(source, (bytes, bytearray, memoryview, pa.Buffer)):
        return bytes(memoryview(source)[start : start + length])
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            handle.seek(start)
            return handle.read(length)
    source.seek(start)
    return bytes(source.read(length))


def _page_header(data: bytes, where: str) -> tuple[tuple[int, int, int], int]:
    """A dictionary page's header (Thrift compact protocol): its uncompressed and compressed sizes and its entry
    count, and the bytes the header took."""
    reader = _CompactReader(data, where)
    fields = reader.struct(keep={2, 3, 7})
    dictionary = fields.get(7)
    if not isinstance(dictionary, dict) or not isinstance(fields.get(2), int) or not isinstance(fields.get(3), int):
        raise ParquetBoundsError(f"{where} has a dictionary page whose header is not one.")
    entries = dictionary.get(1)
    if not isinstance(entries, int) or min(fields[2], fields[3], entries) < 0:
        raise ParquetBoundsError(f"{where} has a dictionary page whose header is not one.")
    return (fields[2], fields[3], entries), reader.position


class _CompactReader:
    """Just enough of the Thrift compact protocol to read a Parquet page header (integers and nested structs
    kept, everything else skipped), refusing what runs past the bytes given or nests deeper than a header does."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.position, self.where = data, 0, where

    def _byte(self) -> int:
        if self.position >= len(self.data):
            raise ParquetBoundsError(f"{self.where} has a page header cut short.")
        self.position += 1
        return self.data[self.position - 1]

    def _varint(self) -> int:
        value = shift = 0
        while True:
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ParquetBoundsError(f"{self.where} has a page header with a malformed number.")

    def _integer(self) -> int:
        value = self._varint()
        return (value >> 1) ^ -(value & 1)

    def struct(self, keep: set[int] | frozenset[int] = frozenset({1}), depth: int = 0) -> dict[int, Any]:
        if depth > 4:
            raise ParquetBoundsError(f"{self.where} has a page header nested too deep.")
        fields: dict[int, Any] = {}
        field = 0
        while True:
            head = self._byte()
            kind = head & 0x0F
            if kind == 0:
                return fields
            delta = head >> 4
            field = field + delta if delta else self._integer()
            if kind in (4, 5, 6):
                value: Any = self._integer()
            elif kind == 12:
                value = self.struct(depth=depth + 1)
            else:
                self._skip(kind, depth)
                value = None
            if field in keep or depth:
                fields[field] = value

    def _skip(self, kind: int, depth: int) -> None:
        if kind in (1, 2):
            return
        if kind == 3:
            self._byte()
        elif kind == 7:
            self.position += 8
        elif kind == 8:
            self.position += self._varint()
        elif kind in (9, 10):
            head = self._byte()
            count = head >> 4 if head >> 4 != 15 else self._varint()
            for _ in range(count):
                self._skip_value(head & 0x0F, depth)
        elif kind == 11:
            count = self._varint()
            if count:
                types = self._byte()
                for _ in range(count):
                    self._skip_value(types >> 4, depth)
                    self._skip_value(types & 0x0F, depth)
        else:
            raise ParquetBoundsError(f"{self.where} has a page header of an unknown kind.")
        if self.position > len(self.data):
            raise ParquetBoundsError(f"{self.where} has a page header cut short.")

    def _skip_value(self, kind: int, depth: int) -> None:
        if kind in (4, 5, 6):
            self._varint()
        elif kind == 12:
            self.struct(depth=depth + 1)
        elif kind in (1, 2):
            self._byte()  # a boolean in a collection takes a byte
        else:
            self._skip(kind, depth)
