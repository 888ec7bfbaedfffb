"""`DeltaFileReader`: one data file of a pinned Delta table version, read as a shard of a dataset.

A stream over a Delta table (`streaming.dataset.delta_stream`) has one shard per data file of its pinned version:
the file is the unit its shard cache downloads, counts under ``cache_limit`` and evicts, and its samples are the
file's rows left once the deletion vector is applied. This reader turns those rows into the samples a conversion
of the same table would give: each row group is read through the table's one reader of data files
(`streaming.delta.scan.Scan.parquet_batches`: column mapping, partition values, the version's types), typed by
the conversion's own rules and encoder (`streaming.convert.type_rules`, `streaming.convert.null_plan`,
`streaming.convert.arrow_encoder`) into MDS sample bytes in memory, and read back by the MDS decoders, so a sample
of the stream is the same row converted to MDS and read back, by construction.

A row group is decoded once per process while it is in use: the decoded groups stay in a least-recently-used
cache of `ROW_GROUP_CACHE_BYTES`, large enough for the groups of a shuffle block. Batch reads take the decoded
groups' columns with the MDS batch reader (`streaming.format.mds.gather`), without a dict per sample: a group a
second batch reads has its columns read out of its samples once (`ShardGather.columnar`), as a shuffled batch takes
a few samples from each of many groups, and locating them in the samples' bytes again for every batch costs more
than the copy. Not at its first batch: an epoch's first batch touches a group of every file, and reading them all
out then made it wait 1.7 times longer.

Before anything is decoded, the file is checked against what the table's log declares: its size (when opened),
its footer's rows (the log's ``numRecords``), each row group's declared decoded bytes at most
`MAX_ROW_GROUP_BYTES` (`streaming.storage.parquet_bounds.row_group_bytes`), and the deletion vector's positions
within its rows (`streaming.delta.deletion_vectors`). The local copy is opened without following a link.
"""

from __future__ import annotations

import io
import os
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streaming.delta.timestamps import PARQUET_OPTIONS
from streaming.format.errors import ShardCorruptError
from streaming.format.mds.encodings import get_mds_encoded_size
from streaming.format.mds.gather import Segment, ShardGather, ShardView, shard_gather
from streaming.format.mds.reader import Decoder, build_decoder
from streaming.format.reader import JointReader, UnmappedFile, open_shard_file, release_mapping
from streaming.storage.parquet_bounds import ParquetBoundsError, row_group_bytes
from streaming.storage.untrusted_text import shown

#: The most one row group of a data file may declare it decodes to; a larger one is refused before it is read.
MAX_ROW_GROUP_BYTES = 2 << 30
#: Decoded row groups a process keeps, in bytes of their MDS samples (least recently used dropped first).
ROW_GROUP_CACHE_BYTES = 1 << 30
#: Rows read and encoded at a time while a row group is decoded.
SLICE_ROWS = 8192
#: An in-memory group is laid out as an MDS shard: its sample count and 32-bit offsets, then its samples.
_MAX_GROUP_LAYOUT = (1 << 32) - 1


class PinnedFiles(Protocol):
    """What a reader needs of its table (`streaming.dataset.delta_stream.PinnedTable`, named here by what it does
    so that the two modules do not import each other)."""

    uri: str
    version: int | None  # None: files of no table version (a Parquet folder)
    token: str
    files: list[Any]  # `DeltaFile`s

    def scan(self) -> Any: ...

    def deleted_rows(self, file: Any, rows: int) -> np.ndarray | None: ...

    def encoding(self, table: pa.Table, where: str) -> tuple[dict[str, str], dict[str, str], Any]: ...

    def normalized(self, batch: pa.RecordBatch) -> pa.RecordBatch: ...


@dataclass(frozen=True)
class DecodedGroup:
    """One row group's samples (deletion vector applied) in MDS layout, with their decoder and batch view."""

    count: int
    buffer: memoryview
    offsets: memoryview  # count + 1 absolute sample offsets in ``buffer`` (int64, indexed as Python ints)
    decode: Decoder
    gather: ShardGather
    view: ShardView
    nbytes: int  # what it holds: its samples, and its columns once read out

    def columnar(self) -> DecodedGroup:
        """This group with its columns read out for batch reads (itself when they are)."""
        if self.view.columns is not None:
            return self
        view = self.gather.columnar(self.view)
        assert view.columns is not None
        return replace(self, view=view, nbytes=self.nbytes + _held_bytes(view.columns))


#: About what CPython takes for a str or bytes object beyond its characters (a read-out value's overhead).
_OBJECT_BYTES = 49


def _held_bytes(columns: dict[str, np.ndarray]) -> int:
    total = 0
    for array in columns.values():
        total += array.nbytes
        if array.dtype == object:
            total += len(array) * _OBJECT_BYTES + sum(map(len, array))
    return total


class _GroupCache:
    """The decoded row groups of this process, by (table version, file, group), bounded in bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # key -> the group and the reader's own table of its decoded groups, which holds it too (a reader finds
        # its groups there without a lock; the cache drops a group from it when it drops the group).
        self._groups: OrderedDict[tuple[str, int, int], tuple[DecodedGroup, dict[int, DecodedGroup]]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, int]) -> DecodedGroup | None:
        with self._lock:
            found = self._groups.get(key)
            if found is None:
                return None
            self._groups.move_to_end(key)
            return found[0]

    def put(self, key: tuple[str, int, int], group: DecodedGroup, owner: dict[int, DecodedGroup]) -> None:
        """Hold ``group`` (in place of the one held under ``key``: two threads decoded it, or it was read out)."""
        with self._lock:
            owner[key[2]] = group
            held = self._groups.pop(key, None)
            if held is not None:
                self._bytes -= held[0].nbytes
            self._groups[key] = (group, owner)
            self._bytes += group.nbytes
            while self._bytes > self.limit and len(self._groups) > 1:
                (_, _, number), (dropped, holder) = self._groups.popitem(last=False)
                holder.pop(number, None)
                self._bytes -= dropped.nbytes


def _new_cache() -> None:
    global DECODED
    DECODED = _GroupCache(ROW_GROUP_CACHE_BYTES)


#: This process's decoded row groups (made anew in a forked child: its parent's lock may have been held).
DECODED = _GroupCache(ROW_GROUP_CACHE_BYTES)
os.register_at_fork(after_in_child=_new_cache)


class _Opened:
    """A data file's local copy, opened and checked: its Parquet reader, and where each row group's live rows
    start among the file's samples."""

    def __init__(self, parquet: pq.ParquetFile, mapping: Any, deleted: np.ndarray | None, firsts: np.ndarray) -> None:
        self.parquet = parquet
        self.mapping = mapping  # kept open for the reader's life (None when the file is read with pread)
        self.deleted = deleted
        self.live_firsts = firsts  # per row group, the sample its first live row is; then the sample count


class DeltaFileReader(JointReader):
    """The data file ``number`` of ``pinned`` (a `PinnedTable`) as a shard in the local folder ``dirname``."""

    def __init__(self, dirname: str, split: str | None, pinned: PinnedFiles, number: int) -> None:
        file = pinned.files[number]
        raw = {"basename": file.name, "bytes": file.size, "hashes": {}}
        super().__init__(dirname, split, None, [], raw, file.samples, None, None)
        self.pinned = pinned
        self.number = number
        self._opened: _Opened | None = None
        self._lock = threading.Lock()
        self._firsts: list[int] = []  # `_Opened.live_firsts` as Python ints, once opened
        self._decoded: dict[int, DecodedGroup] = {}  # this reader's groups the process cache holds
        self._batches: dict[int, int] = {}  # batches read from each row group, in this process

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_opened=None, _lock=None, _firsts=[], _decoded={}, _batches={})
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ opening

    def _where(self) -> str:
        return f"data file {shown(self.raw_data.basename)} of version {self.pinned.version} of {shown(self.pinned.uri)}"

    def open(self) -> _Opened:
        """Open the local copy (no link followed), check it against the log, and read its deletion vector."""
        with self._lock:
            if self._opened is not None:
                return self._opened
            file = self.pinned.files[self.number]
            opened = open_shard_file(self.tree, self.relative(file.name), file.size)
            mapping: Any = None
            if isinstance(opened, UnmappedFile):
                source: Any = io.BufferedReader(io.FileIO(os.dup(opened.fd), "rb"))
            else:
                mapping = opened
                source = pa.py_buffer(opened)
            where = self._where()
            try:
                parquet = pq.ParquetFile(pa.BufferReader(source) if mapping is not None else source, **PARQUET_OPTIONS)
            except (pa.ArrowException, OSError) as err:
                raise ShardCorruptError(f"The {where} is not a Parquet file: {err}") from None
            footer = parquet.metadata
            if footer.num_rows != file.rows:
                raise ParquetBoundsError(
                    f"The {where} declares {footer.num_rows} rows where the table's log says {file.rows}; it was "
                    f"not read."
                )
            rows = np.array([footer.row_group(g).num_rows for g in range(footer.num_row_groups)], np.int64)
            for group in range(footer.num_row_groups):
                size = row_group_bytes(source, footer.row_group(group), where)
                if size > MAX_ROW_GROUP_BYTES:
                    raise ParquetBoundsError(
                        f"The {where}: row group {group} declares {size} bytes decoded, more than the "
                        f"{MAX_ROW_GROUP_BYTES} a stream decodes at once; it was not read (rewrite the table with "
                        f"smaller row groups, or convert it)."
                    )
            deleted = self.pinned.deleted_rows(file, footer.num_rows)
            live = rows.copy()
            if deleted is not None and len(deleted):
                firsts = np.concatenate([[0], np.cumsum(rows)])
                live -= np.diff(np.searchsorted(deleted, firsts))
            live_firsts = np.concatenate([[0], np.cumsum(live)]).astype(np.int64)
            if int(live_firsts[-1]) != self.samples:
                raise ShardCorruptError(
                    f"The {where} holds {int(live_firsts[-1])} rows once its deletion vector is applied where the "
                    f"log says {self.samples}."
                )
            self._opened = _Opened(parquet, mapping, deleted, live_firsts)
            self._firsts = live_firsts.tolist()
            return self._opened

    def release_pages(self) -> None:
        if self._opened is not None and self._opened.mapping is not None:
            release_mapping(self._opened.mapping)

    # ------------------------------------------------------------------ row groups

    def group(self, number: int, columnar: bool = False) -> DecodedGroup:
        """Row group ``number``'s samples, decoded once per process while the cache keeps them; ``columnar``: with
        its columns read out for batch reads (`DecodedGroup.columnar`)."""
        decoded = self._decoded.get(number)
        if decoded is not None and (not columnar or decoded.view.columns is not None):
            return decoded
        key = (self.pinned.token, self.number, number)
        decoded = DECODED.get(key)
        if decoded is None:
            decoded = self._decode(self._opened or self.open(), number)
        if columnar:
            decoded = decoded.columnar()
        DECODED.put(key, decoded, self._decoded)
        return decoded

    def _decode(self, opened: _Opened, number: int) -> DecodedGroup:
        pinned = self.pinned
        action = replace(pinned.files[self.number].action, vector=None)  # applied below, read once per file
        # Read and encoded a slice at a time: batches of a few thousand rows decode and encode several times
        # faster than one of the whole group (a row group of 196,000 rows: 0.13 s against 0.4 s to decode).
        batches = list(pinned.scan().parquet_batches(action, opened.parquet, SLICE_ROWS, [number]))
        table = pa.Table.from_batches(batches, schema=pinned.scan().schema)
        if opened.deleted is not None and len(opened.deleted):
            first = self._group_start(opened, number)
            kept = np.ones(table.num_rows, dtype=bool)
            inside = opened.deleted[(opened.deleted >= first) & (opened.deleted < first + table.num_rows)]
            kept[inside - first] = False
            table = table.filter(pa.array(kept))
        columns, masks, encoder = pinned.encoding(table, f"the {self._where()}, row group {number}: ")
        pieces = [encoder.encode(pinned.normalized(batch)) for batch in table.to_batches(max_chunksize=SLICE_ROWS)]
        sizes = np.concatenate([piece[1] for piece in pieces]) if pieces else np.zeros(0, np.int64)
        count = table.num_rows
        header = 4 * (count + 2)
        offsets = np.empty(count + 1, np.int64)
        offsets[0] = header
        np.cumsum(sizes, out=offsets[1:])
        offsets[1:] += header
        if int(offsets[-1]) > _MAX_GROUP_LAYOUT:
            raise ParquetBoundsError(
                f"The {self._where()}: row group {number} takes {int(offsets[-1])} bytes as samples, more than a "
                f"stream holds at once (4 GiB); rewrite the table with smaller row groups, or convert it."
            )
        layout = bytearray(int(offsets[-1]))
        layout[0:4] = count.to_bytes(4, "little")
        layout[4:header] = offsets.astype("<u4").tobytes()
        position = header
        for piece, _ in pieces:
            layout[position : position + len(piece)] = piece
            position += len(piece)
        buffer = memoryview(layout).toreadonly()  # samples are views of it: nobody writes into the cache
        names = tuple(sorted(columns))
        encodings = tuple(columns[name] for name in names)
        sizes_fixed = tuple(get_mds_encoded_size(encoding) for encoding in encodings)
        gather = shard_gather(names, encodings, sizes_fixed)
        return DecodedGroup(
            count,
            buffer,
            memoryview(offsets.data).cast("B").cast("q"),
            build_decoder(names, encodings, sizes_fixed),
            gather,
            gather.view(buffer, count),
            len(buffer),
        )

    @staticmethod
    def _group_start(opened: _Opened, number: int) -> int:
        footer = opened.parquet.metadata
        return sum(int(footer.row_group(g).num_rows) for g in range(number))

    def _locate(self, idx: int) -> tuple[int, int]:
        if not 0 <= idx < self.samples:
            raise IndexError(f"Sample {idx} is out of range for {self._where()} of {self.samples} samples.")
        if self._opened is None:
            self.open()
        firsts = self._firsts
        number = bisect_right(firsts, idx) - 1
        return number, idx - firsts[number]

    # ------------------------------------------------------------------ samples

    def get_item(self, idx: int) -> dict[str, Any]:
        number, index = self._locate(idx)
        group = self._decoded.get(number) or self.group(number)
        offsets = group.offsets
        return group.decode(group.buffer, offsets[index], offsets[index + 1])

    def get_sample_data(self, idx: int) -> bytes:
        number, index = self._locate(idx)
        group = self.group(number)
        return bytes(group.buffer[group.offsets[index] : group.offsets[index + 1]])

    def decode_sample(self, data: bytes) -> dict[str, Any]:
        """Decode sample bytes of this file's first row group (groups may type a column apart: see the docs)."""
        group = self.group(0)
        view = memoryview(data)
        return group.decode(view, 0, len(view))

    def _batch_group(self, number: int) -> DecodedGroup:
        """Row group ``number`` for a batch read: its columns read out from the second batch that reads it on."""
        seen = self._batches.get(number, 0)
        self._batches[number] = seen + 1
        return self.group(number, columnar=seen > 0)

    def batch_segments(
        self, indices: np.ndarray, positions: np.ndarray | None
    ) -> tuple[ShardGather | None, list[Segment]]:
        """The samples ``indices`` of this file as MDS batch segments, one per row group they lie in, each with
        its samples' ``positions`` in the batch (None: ``indices`` are the whole batch, in order); no batch reader
        (None) when two of those row groups type a column apart (the caller reads sample by sample)."""
        firsts = (self._opened or self.open()).live_firsts
        if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= self.samples):
            raise IndexError(f"A sample is out of range for {self._where()} of {self.samples} samples.")
        if len(firsts) == 2:  # one row group (a file of up to ~128 MB as Spark writes them): one segment
            group = self._batch_group(0)
            return group.gather, [Segment(group.view, indices, positions)]
        numbers = np.searchsorted(firsts, indices, "right") - 1
        every = np.arange(len(indices)) if positions is None else positions
        gather: ShardGather | None = None
        segments = []
        for number in np.unique(numbers).tolist():
            chosen = np.flatnonzero(numbers == number)
            group = self._batch_group(number)
            if gather is not None and group.gather is not gather:
                return None, []
            gather = group.gather
            whole = positions is None and len(chosen) == len(indices)
            segments.append(Segment(group.view, indices[chosen] - firsts[number], None if whole else every[chosen]))
        if gather is None:
            gather = self.group(0).gather
        return gather, segments
