"""Batch reads of MDS shards: many samples gathered at once from the mapped files, a column at a time.

A per-sample read decodes one sample into a dict; a batch read gives `streaming.format.columns.Columns`, one
entry per column, from a few numpy operations per column whatever the number of samples. It runs in two steps
so that the bytes of stacked columns are copied once, straight to where the caller wants them (a DataLoader
worker's shared-memory slot): `ShardGather.prepare` locates and checks every sample and decodes the columns that
stay lists, and the `BatchRead` it returns copies the stacked columns into blocks the caller gives (`fill`) or
allocates (`columns`).

* Shards whose columns are all fixed-size (the tabular case) hold every sample as a record of one size, so the
  batch's records are taken from the mapped file with one ``numpy.take`` per shard; each run of consecutive
  number columns of one dtype (100 ``float32`` features) becomes its columns in one blocked transpose.
* Otherwise the uint32 length header of every sample is read at once and each column's byte positions follow by
  vector arithmetic: fixed-size columns are copied from those positions, ``ndarray`` columns whose samples share
  dtype and shape are stacked from their values (the headers checked at once), strings and bytes are cut by
  their offsets in one pass, and any other encoding is decoded value by value with the per-sample decoders.
* A shard held in memory and read in small pieces (a Delta table's decoded row group, of which a shuffled batch
  takes a few samples) can have those columns read out of all its samples once (`ShardGather.columnar`); a batch
  then takes their rows by one numpy index per shard and column.

The values are those of a per-sample read (`streaming.format.mds.reader.build_decoder`), NULL masks folded the
same way; stacked only where ``default_collate`` would make one tensor of the same dtype and values of the
per-sample values. Only the built-in coder classes take the vectorised paths: a class registered in their place
decodes value by value.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from streaming.format.columns import Columns
from streaming.format.mds.encodings import (
    DTYPE_OF_CODE,
    Bytes,
    Float16,
    Float32,
    Float64,
    Int,
    Int8,
    Int16,
    Int32,
    Int64,
    NDArray,
    Str,
    UInt8,
    UInt16,
    UInt32,
    ValueDecoder,
    get_mds_coder,
    value_decoder,
)
from streaming.format.mds.nulls import masked_columns

# Scalar classes whose stacked values equal default_collate's tensor of the numpy scalars. (uint64 is left out:
# default_collate cannot make a tensor of numpy uint64 scalars, so such a column stays a list and fails alike.)
_STACKED_SCALARS = (UInt8, UInt16, UInt32, Int8, Int16, Int32, Int64, Float16, Float32, Float64)
# Values up to this many bytes are gathered by indexing every byte; wider ones through a sliding window.
_FANCY_WIDTH = 8
# Values at least this large are copied row by row straight to their destination, not through a temporary.
_ROW_BY_ROW = 1024
# Rows per step of a blocked transpose (both blocks then stay in the CPU's cache).
_TRANSPOSE_ROWS = 512

FIXED, NDARRAY, STR, BYTES, OTHER = "fixed", "ndarray", "str", "bytes", "other"


class BatchLayoutError(ValueError):
    """Some samples' bytes do not have the layout of their shard's columns (a corrupt shard)."""


@dataclass(frozen=True)
class _Plan:
    """How to read one column in a batch."""

    name: str
    size: int | None  # fixed byte size, or None
    length_index: int  # its length's place in the sample's header, or -1 when fixed-size
    kind: str
    dtype: np.dtype | None  # FIXED: the value dtype; NDARRAY: the configured dtype or None
    shape: tuple[int, ...]  # FIXED: the shape of one value (() for a number)
    python_int: bool  # values read back as Python ints (``int``), not numpy scalars
    decode: ValueDecoder


class ShardView(NamedTuple):
    """One mapped shard as numpy sees it: its bytes, its sample offsets, and its records when fixed-size."""

    data: np.ndarray  # uint8, the whole file
    buffer: memoryview  # the same bytes, for the per-value decoders
    offsets: np.ndarray  # the samples + 1 sample offsets (int64)
    records: np.ndarray | None  # (samples, record size) uint8 when every sample is one record of that size
    # Columns already read out of every sample (`ShardGather.columnar`): stacked values, or an object array of the
    # str or bytes values; a column left out is read from the bytes. None: none read out.
    columns: dict[str, np.ndarray] | None = None


class Segment(NamedTuple):
    """The samples of a batch that one shard holds: their indices in it and their positions in the batch."""

    view: ShardView
    indices: np.ndarray  # int64 sample indices within the shard
    positions: np.ndarray | None  # their positions in the batch; None: the whole batch, in order


#: Copies rows ``start..stop`` of a batch's column (or run of columns) into the given array (or block).
_Fill = Callable[[np.ndarray, int, int], None]

#: A run of stacked columns: consecutive keys of one dtype and batched shape, filled as one block of shape
#: ``(len(keys), *shape)``.
Run = tuple[tuple[str, ...], np.dtype, tuple[int, ...]]


@dataclass(frozen=True)
class _Stacked:
    """A column whose values all have one dtype and shape, and how to copy them into a batched array."""

    dtype: np.dtype
    shape: tuple[int, ...]  # of one value
    copy: _Fill  # copies rows start..stop into a C-contiguous (stop - start, *shape) array of that dtype

    def array(self, count: int) -> np.ndarray:
        out = np.empty((count, *self.shape), self.dtype)
        self.copy(out, 0, count)
        return out


class BatchRead:
    """Samples located in their shards and checked: the values of their list columns, and how to copy the rest.

    Any consecutive rows of it can be taken as a batch of their own (`fill`, `columns`): a DataLoader worker
    prepares the samples of several batches at once and copies each batch to where it goes.

    Attributes:
        count: the number of samples.
        keys: every column, in the samples' key order.
        runs: the stacked columns, grouped in runs; each run's shape is that of one of its columns, batched.
        lists: the other columns' values.
    """

    def __init__(
        self,
        count: int,
        keys: tuple[str, ...],
        runs: list[Run],
        fills: list[_Fill],
        lists: dict[str, list[Any]],
    ) -> None:
        self.count = count
        self.keys = keys
        self.runs = runs
        self._fills = fills
        self.lists = lists

    @classmethod
    def of_columns(cls, columns: Columns) -> BatchRead:
        """A batch already read (sample by sample, say), in this form."""
        runs: list[Run] = []
        fills: list[_Fill] = []
        lists: dict[str, list[Any]] = {}
        for key, column in columns.items():
            if isinstance(column, np.ndarray):
                runs.append(((key,), column.dtype, column.shape))
                fills.append(_rows_of(column))
            else:
                lists[key] = column
        return cls(len(next(iter(columns.values()), ())), tuple(columns), runs, fills, lists)

    def fill(self, blocks: Sequence[np.ndarray], start: int = 0, stop: int | None = None) -> dict[str, np.ndarray]:
        """Copy rows ``start..stop`` of the stacked columns into ``blocks``: one per run, C-contiguous, of the run's
        dtype and shape (``len(keys), stop - start, ...``). Return each stacked column as its row of its block."""
        stop = self.count if stop is None else min(stop, self.count)
        arrays: dict[str, np.ndarray] = {}
        for (keys, _, _), fill, block in zip(self.runs, self._fills, blocks):
            fill(block, start, stop)
            arrays.update(zip(keys, block))
        return arrays

    def columns(self, start: int = 0, stop: int | None = None) -> Columns:
        """Rows ``start..stop`` as columns, the stacked ones in new arrays."""
        stop = self.count if stop is None else min(stop, self.count)
        blocks = [np.empty((len(keys), stop - start, *shape[1:]), dtype) for keys, dtype, shape in self.runs]
        arrays = self.fill(blocks, start, stop)
        return {key: arrays[key] if key in arrays else self.lists[key][start:stop] for key in self.keys}


def _plan(name: str, encoding: str, size: int | None, length_index: int) -> _Plan:
    coder = get_mds_coder(encoding)
    kind, dtype, python_int = OTHER, None, False
    shape: tuple[int, ...] = ()
    if type(coder) in _STACKED_SCALARS:
        kind, dtype = FIXED, coder._dtype  # type: ignore[attr-defined]
    elif type(coder) is Int:
        kind, dtype, python_int = FIXED, np.dtype("<i8"), True
    elif type(coder) is NDArray:
        if coder.size is not None:
            assert coder.shape is not None and coder._dtype is not None
            kind, dtype, shape = FIXED, coder._dtype, coder.shape
        else:
            kind, dtype = NDARRAY, coder._dtype
    elif type(coder) is Str:
        kind = STR
    elif type(coder) is Bytes:
        kind = BYTES
    if kind == FIXED and size != dtype.itemsize * int(np.prod(shape)):  # type: ignore[union-attr]
        kind, dtype, shape, python_int = OTHER, None, (), False  # an index whose size disagrees: decode each
    return _Plan(name, size, length_index, kind, dtype, tuple(shape), python_int, value_decoder(encoding))


class ShardGather:
    """Batch reads of the shards of one schema (column names, encodings and sizes); see the module docstring."""

    def __init__(self, names: tuple[str, ...], encodings: tuple[str, ...], sizes: tuple[int | None, ...]) -> None:
        self.plans: dict[str, _Plan] = {}
        length_index = 0
        for name, encoding, size in zip(names, encodings, sizes):
            self.plans[name] = _plan(name, encoding, size, -1 if size is not None else length_index)
            length_index += size is None
        self.num_lengths = length_index
        self.fixed_bytes = sum(size for size in sizes if size is not None)
        #: Bytes of every sample when all columns are fixed-size, else None.
        self.record_size = self.fixed_bytes if not self.num_lengths and self.fixed_bytes else None
        self.offsets: dict[str, int] = {}  # each column's byte offset in a record, when fixed-size
        if self.record_size is not None:
            offset = 0
            for name, size in zip(names, sizes):
                self.offsets[name] = offset
                offset += size  # type: ignore[operator]
        #: Value column -> its NULL-mask column.
        self.pairs = masked_columns(names, encodings)
        masks = set(self.pairs.values())
        #: The keys of a sample, in a per-sample read's order (mask columns folded into their values).
        self.keys = tuple(name for name in names if name not in masks)

    def view(self, buffer: memoryview, samples: int) -> ShardView:
        """The numpy view of a mapped shard (its offsets already checked by the reader)."""
        data = np.frombuffer(buffer, np.uint8) if len(buffer) else np.zeros(0, np.uint8)
        offsets = np.frombuffer(buffer, "<u4", samples + 1, 4).astype(np.int64)
        records = None
        size = self.record_size
        if size is not None and samples:
            first = int(offsets[0])
            if int(offsets[-1]) - first == samples * size and bool(np.all(np.diff(offsets) == size)):
                records = data[first : first + samples * size].reshape(samples, size)
        return ShardView(data, buffer, offsets, records)

    def columnar(self, view: ShardView) -> ShardView:
        """``view`` with its columns read out of all its samples once (`ShardView.columns`): the stacked columns,
        and the str and bytes ones (immutable values, so a batch can share them). For a shard held in memory and
        read by many small segments (a Delta table's decoded row group): a batch then takes each column's rows by
        one numpy index per segment instead of locating and checking its samples' bytes every time. A shard of
        fixed-size records gets none (its batches take whole records), nor one without samples."""
        count = len(view.offsets) - 1
        if view.records is not None or not count:
            return view._replace(columns={})
        segment = Segment(view, np.arange(count), None)
        located = self._locate(segment)
        columns: dict[str, np.ndarray] = {}
        for name, plan in self.plans.items():
            parts = [(segment, located[name])]
            if plan.kind in (FIXED, NDARRAY):
                stacked = self._stacked(plan, parts)
                if stacked is not None:
                    columns[name] = stacked.array(count)
            elif plan.kind in (STR, BYTES):
                values = np.empty(count, object)
                values[:] = self._values(plan, parts, count)
                columns[name] = values
        return view._replace(columns=columns)

    def gather(self, segments: Sequence[Segment], count: int) -> Columns:
        """The columns of a batch of ``count`` samples taken from ``segments`` (one per shard), in new arrays."""
        return self.prepare(segments, count).columns()

    def prepare(self, segments: Sequence[Segment], count: int) -> BatchRead:
        """Locate and check a batch of ``count`` samples taken from ``segments`` (one per shard).

        The batch must be consumed (`BatchRead.fill` or `BatchRead.columns`) before this thread prepares another:
        a batch of fixed-size records waits in a buffer of the thread that is reused.

        Raises:
            BatchLayoutError: some sample's bytes do not fit the columns; or any error a value's decoder raises
                (the caller finds the sample by a per-sample read).
        """
        from_records = self.record_size is not None and all(segment.view.records is not None for segment in segments)
        copies = self._from_records(segments, count) if from_records else self._from_layout(segments, count)
        return self._batch(copies, count, from_records)

    # ------------------------------------------------------------------ fixed-size records

    def _from_records(self, segments: Sequence[Segment], count: int) -> dict[str, _Stacked | list[Any]]:
        """Every column as a copy out of the batch's records, taken now into this thread's buffer."""
        size = self.record_size
        assert size is not None
        records = _scratch(count * size).reshape(count, size)
        if len(segments) == 1 and segments[0].positions is None:
            assert segments[0].view.records is not None
            np.take(segments[0].view.records, segments[0].indices, axis=0, out=records)
        else:
            # Taken shard after shard, then put in batch order by one more take: numpy gathers rows several
            # times faster than it scatters them.
            by_shard = _scratch(count * size, 1).reshape(count, size)
            order = np.empty(count, np.int64)
            done = 0
            for view, indices, positions in segments:
                assert view.records is not None and positions is not None
                np.take(view.records, indices, axis=0, out=by_shard[done : done + len(indices)])
                order[positions] = np.arange(done, done + len(indices))
                done += len(indices)
            np.take(by_shard, order, axis=0, out=records)
        copies: dict[str, _Stacked | list[Any]] = {}
        for name, plan in self.plans.items():
            assert plan.size is not None
            values = records[:, self.offsets[name] : self.offsets[name] + plan.size]
            if plan.kind == FIXED:
                assert plan.dtype is not None
                copies[name] = _Stacked(plan.dtype, plan.shape, _bytes_rows(values))
            else:
                # Decoded from a private copy: a decoder may keep a view of its buffer, and this one is reused.
                buffer = memoryview(np.ascontiguousarray(values).tobytes())
                starts = range(0, count * plan.size, plan.size)
                copies[name] = [plan.decode(buffer, start, start + plan.size) for start in starts]
        return copies

    def _transpose(self, keys: tuple[str, ...], count: int) -> _Fill:
        """A fill of a run of number columns that lie side by side in the records: one blocked transpose."""
        width = self.plans[keys[0]].size
        offset = self.offsets[keys[0]]
        size = self.record_size
        assert width is not None and size is not None

        def transpose(block: np.ndarray, start: int, stop: int) -> None:
            records = _scratch(count * size).reshape(count, size)
            source = records[start:stop, offset : offset + width * len(keys)].view(f"<u{width}")
            target = block.view(f"<u{width}")
            for row in range(0, stop - start, _TRANSPOSE_ROWS):
                target[:, row : row + _TRANSPOSE_ROWS] = source[row : row + _TRANSPOSE_ROWS].T

        return transpose

    # ------------------------------------------------------------------ any layout

    def _from_layout(self, segments: Sequence[Segment], count: int) -> dict[str, _Stacked | list[Any]]:
        """Every column located in each segment by the samples' length headers."""
        located: list[dict[str, tuple[np.ndarray, np.ndarray]]] | None = None  # only for a column not read out
        copies: dict[str, _Stacked | list[Any]] = {}
        for name, plan in self.plans.items():
            taken = self._read_out(name, segments, count)
            if taken is not None:
                copies[name] = taken
                continue
            if located is None:
                located = [self._locate(segment) for segment in segments]
            parts = [(segment, bounds[name]) for segment, bounds in zip(segments, located)]
            copy = self._stacked(plan, parts) if plan.kind in (FIXED, NDARRAY) else None
            copies[name] = copy if copy is not None else self._values(plan, parts, count)
        return copies

    @staticmethod
    def _read_out(name: str, segments: Sequence[Segment], count: int) -> _Stacked | list[Any] | None:
        """Column ``name`` taken from the segments' read-out columns; None unless every segment has it, in one
        dtype and value shape."""
        arrays: list[np.ndarray] = []
        for segment in segments:
            array = segment.view.columns.get(name) if segment.view.columns is not None else None
            if array is None or (arrays and (array.dtype, array.shape[1:]) != (arrays[0].dtype, arrays[0].shape[1:])):
                return None
            arrays.append(array)
        if not arrays:
            return None
        jobs = [(array, segment.indices, segment.positions) for array, segment in zip(arrays, segments)]
        if arrays[0].dtype == object:
            values = np.empty(count, object)
            for array, indices, positions in jobs:
                values[slice(None) if positions is None else positions] = array[indices]
            return values.tolist()

        def copy(out: np.ndarray, start: int, stop: int) -> None:
            for array, indices, positions in jobs:
                if positions is None:
                    np.take(array, indices[start:stop], axis=0, out=out)
                elif start == 0 and stop == count:
                    out[positions] = array[indices]
                else:
                    inside = (positions >= start) & (positions < stop)
                    out[positions[inside] - start] = array[indices[inside]]

        return _Stacked(arrays[0].dtype, arrays[0].shape[1:], copy)

    def _locate(self, segment: Segment) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{column: (starts, stops)}``: the byte range of each column of each of the segment's samples."""
        view, indices, _ = segment
        starts = view.offsets[indices]
        ends = view.offsets[indices + 1]
        header = 4 * self.num_lengths
        bad = (starts + header > ends) | (ends > len(view.data))
        if bad.any():
            raise BatchLayoutError(f"samples {indices[bad][:8].tolist()} are cut off")
        lengths = None
        if self.num_lengths:
            lengths = _gather_rows(view.data, starts, header).view("<u4").astype(np.int64)
            total = header + self.fixed_bytes + lengths.sum(axis=1)
        else:
            total = np.full(len(starts), self.fixed_bytes, np.int64)
        wrong = total != ends - starts
        if wrong.any():
            raise BatchLayoutError(f"samples {indices[wrong][:8].tolist()} have the wrong size")
        bounds = {}
        position = starts + header
        for name, plan in self.plans.items():
            if plan.length_index < 0:
                assert plan.size is not None
                stop = position + plan.size
            else:
                assert lengths is not None
                stop = position + lengths[:, plan.length_index]
            bounds[name] = (position, stop)
            position = stop
        return bounds

    def _stacked(self, plan: _Plan, parts: list[tuple[Segment, tuple[np.ndarray, np.ndarray]]]) -> _Stacked | None:
        """A copy of a column whose values all have one dtype and shape, from each segment; None otherwise."""
        found = []
        for segment, (starts, stops) in parts:
            if plan.kind == FIXED:
                assert plan.size is not None and plan.dtype is not None
                found.append((plan.dtype, plan.shape, starts, plan.size))
                continue
            stacked = _ndarray_layout(segment.view.data, starts, stops, plan.dtype)
            if stacked is None:
                return None
            found.append(stacked)
        if len({(dtype, shape) for dtype, shape, _, _ in found}) != 1:
            return None
        jobs = [
            (segment.view.data, starts, width, segment.positions)
            for (segment, _), (_, _, starts, width) in zip(parts, found)
        ]

        def copy(out: np.ndarray, start: int, stop: int) -> None:
            target = _bytes_of(out)
            for data, starts, width, positions in jobs:
                if positions is None:
                    _copy_rows(target, data, starts[start:stop], width, None)
                else:
                    inside = (positions >= start) & (positions < stop)
                    _copy_rows(target, data, starts[inside], width, positions[inside] - start)

        return _Stacked(found[0][0], found[0][1], copy)

    def _values(self, plan: _Plan, parts: list[tuple[Segment, tuple[np.ndarray, np.ndarray]]], count: int) -> list[Any]:
        """A column's values decoded one by one, in batch order."""
        values: list[Any] = [None] * count
        for segment, (starts, stops) in parts:
            buffer = segment.view.buffer
            pairs = zip(starts.tolist(), stops.tolist())
            items: list[Any]
            if plan.kind == STR:
                items = [str(buffer[start:stop], "utf-8") for start, stop in pairs]
            elif plan.kind == BYTES:
                items = [bytes(buffer[start:stop]) for start, stop in pairs]
            else:
                decode = plan.decode
                items = [decode(buffer, start, stop) for start, stop in pairs]
            if segment.positions is None:
                values[:] = items
            else:
                for position, item in zip(segment.positions.tolist(), items):
                    values[position] = item
        return values

    # ------------------------------------------------------------------ the batch

    def _batch(self, copies: dict[str, _Stacked | list[Any]], count: int, from_records: bool) -> BatchRead:
        """Masks folded (a column with a NULL in the batch becomes a list with None there), stacked columns in runs."""
        for value, mask in self.pairs.items():
            flags = copies.pop(mask)
            if isinstance(flags, list):
                nulls: np.ndarray = np.array([bool(flag) for flag in flags], bool)
            else:
                nulls = np.asarray(flags.array(count).reshape(count, -1).any(axis=1))
            if nulls.any():
                items = _values_of(copies[value], self.plans[value], count)
                for position in np.flatnonzero(nulls).tolist():
                    items[position] = None
                copies[value] = items
        runs: list[Run] = []
        lists: dict[str, list[Any]] = {}
        for key in self.keys:
            copy = copies[key]
            if isinstance(copy, list):
                lists[key] = copy
                continue
            shape = (count, *copy.shape)
            if runs and runs[-1][1] == copy.dtype and runs[-1][2] == shape and self._adjacent(runs[-1][0][-1], key):
                runs[-1] = ((*runs[-1][0], key), copy.dtype, shape)
            else:
                runs.append(((key,), copy.dtype, shape))
        fills: list[_Fill] = []
        for keys, _, _ in runs:
            if from_records and len(keys) > 1 and all(self.plans[key].shape == () for key in keys):
                fills.append(self._transpose(keys, count))
            else:
                fills.append(_each_row([copies[key] for key in keys]))  # type: ignore[misc]
        return BatchRead(count, self.keys, runs, fills, lists)

    def _adjacent(self, last: str, key: str) -> bool:
        """Whether ``key`` may join a run ending with column ``last``: always, except that in records a run is one
        side-by-side stretch of columns (number columns then become theirs by one transpose)."""
        if self.record_size is None:
            return True
        size = self.plans[last].size
        assert size is not None
        return self.offsets[last] + size == self.offsets[key]


@lru_cache(maxsize=256)
def _shard_gather(
    names: tuple[str, ...], encodings: tuple[str, ...], sizes: tuple[int | None, ...], coder_types: tuple[type, ...]
) -> ShardGather:
    # `coder_types` is part of the cache key only: re-registering an encoding's class builds a new plan.
    return ShardGather(names, encodings, sizes)


def shard_gather(names: Sequence[str], encodings: Sequence[str], sizes: Sequence[int | None]) -> ShardGather:
    """The (shared) batch reader of a schema; shards of one schema get the same object."""
    encodings = tuple(encodings)
    return _shard_gather(
        tuple(names), encodings, tuple(sizes), tuple(type(get_mds_coder(encoding)) for encoding in encodings)
    )


_local = threading.local()


def _scratch(nbytes: int, which: int = 0) -> np.ndarray:
    """Reused uint8 buffer ``which`` (0 or 1) of this thread, its first ``nbytes``: the records of a batch are
    only a step on the way to its columns, and a fresh buffer of a few MiB costs a page fault per page."""
    buffers = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = [np.empty(0, np.uint8), np.empty(0, np.uint8)]
    if len(buffers[which]) < nbytes:
        buffers[which] = np.empty(nbytes, np.uint8)
    return buffers[which][:nbytes]


def _rows_of(column: np.ndarray) -> _Fill:
    """A fill of a one-column run from a stacked column."""

    def fill(block: np.ndarray, start: int, stop: int) -> None:
        np.copyto(block[0], column[start:stop])

    return fill


def _bytes_rows(values: np.ndarray) -> _Fill:
    """A copy of rows of ``(rows, bytes)`` uint8 values into a batched array of their dtype."""

    def copy(out: np.ndarray, start: int, stop: int) -> None:
        np.copyto(_bytes_of(out), values[start:stop])

    return copy


def _each_row(columns: list[_Stacked]) -> _Fill:
    def fill(block: np.ndarray, start: int, stop: int) -> None:
        for column, row in zip(columns, block):
            column.copy(row, start, stop)

    return fill


def _values_of(column: _Stacked | list[Any], plan: _Plan, count: int) -> list[Any]:
    """A column's values as a per-sample read gives them (numpy scalars, Python ints, arrays, objects)."""
    if isinstance(column, list):
        return column
    array = column.array(count)
    return array.tolist() if plan.python_int else list(array)


def _bytes_of(out: np.ndarray) -> np.ndarray:
    """A C-contiguous batched array as ``(rows, bytes per row)`` uint8."""
    return out.reshape(len(out), -1).view(np.uint8)


def _copy_rows(target: np.ndarray, data: np.ndarray, starts: np.ndarray, width: int, positions: Any) -> None:
    """``target[positions[i]] = data[starts[i]:starts[i] + width]`` (positions None: row i)."""
    if width >= _ROW_BY_ROW:
        rows = range(len(starts)) if positions is None else positions.tolist()
        for row, start in zip(rows, starts.tolist()):
            target[row] = data[start : start + width]
    elif positions is None:
        target[...] = _gather_rows(data, starts, width)
    else:
        target[positions] = _gather_rows(data, starts, width)


def _gather_rows(data: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``(len(starts), width)`` uint8: a copy of the ``width`` bytes at each start (all within ``data``)."""
    if width <= _FANCY_WIDTH or not len(starts):
        return data[starts[:, None] + np.arange(width)]
    # Row r of the window is data[r:r + width]: indexing it by the starts copies each value in one memcpy.
    window = as_strided(data, (len(data) - width + 1, width), (1, 1), writeable=False)
    return window[starts]


def _ndarray_layout(
    data: np.ndarray, starts: np.ndarray, stops: np.ndarray, dtype: np.dtype | None
) -> tuple[np.dtype, tuple[int, ...], np.ndarray, int] | None:
    """``(dtype, shape, value starts, value bytes)`` of ``ndarray`` values that all have one dtype and shape.

    Layout of a value: [dtype code, unless configured] [shape header: ndim << 2 | width code] [ndim dims of that
    width] [values]. None unless every header is byte for byte the first one's and every value is exactly as long
    as that header says, so nothing a per-value decode would refuse is stacked.
    """
    rows = len(starts)
    lead = 0 if dtype is not None else 1
    if not rows or bool(np.any(stops - starts < lead + 1)):
        return None
    first = int(starts[0])
    if dtype is None:
        dtype = DTYPE_OF_CODE[int(data[first])]
        if dtype is None:
            return None
    shape_header = int(data[first + lead])
    ndim, width = shape_header >> 2, 1 << (shape_header & 3)
    head = lead + 1 + ndim * width
    if bool(np.any(stops - starts < head)):
        return None
    heads = _gather_rows(data, starts, head)
    if not bool(np.all(heads == heads[0])):
        return None
    shape = tuple(int(dim) for dim in heads[0, lead + 1 :].view(f"<u{width}"))
    size = math.prod(shape) * dtype.itemsize  # Python's product: numpy's wraps past 2**64 to a small size
    if not bool(np.all(stops - starts == head + size)):
        return None
    return dtype, shape, starts + head, size
