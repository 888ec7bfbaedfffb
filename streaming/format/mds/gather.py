"""Batch reads of MDS shards: many samples gathered at once from the mapped files, a column at a time.

A per-sample read decodes one sample into a dict; a batch read returns `streaming.format.columns.Columns`, one
entry per column, from a few numpy operations per column whatever the number of samples:

* shards whose columns are all fixed-size (the tabular case) hold every sample as a record of the same size, so
  the batch's records are taken from the mapped file in one ``numpy.take`` per shard; runs of consecutive
  columns of one width (100 ``float32`` features) then become their columns in one blocked transpose;
* otherwise the uint32 length header of every sample is read at once and each column's byte positions follow by
  vector arithmetic: fixed-size columns are gathered by those positions, ``ndarray`` columns whose samples share
  dtype and shape are stacked from their values (the header checked at once for all), strings and bytes are
  cut by their offsets in one pass, and any other encoding is decoded value by value with the per-sample
  path's own decoders.

The values are those of a per-sample read (`streaming.format.mds.reader.build_decoder`), NULL masks folded the
same way; stacked only where ``default_collate`` would make one tensor of the same dtype and values. Only the
built-in coder classes take the vectorised paths: a class registered in their place decodes value by value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from streaming.format.columns import Column, Columns
from streaming.format.mds.encodings import (
    _DTYPE_OF_CODE,
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
# Rows per step of a blocked transpose (both blocks then stay in the CPU's cache).
_TRANSPOSE_ROWS = 512

FIXED, NDARRAY, STR, BYTES, OTHER = "fixed", "ndarray", "str", "bytes", "other"


class BatchLayoutError(ValueError):
    """The samples at some batch positions do not have the layout of their shard's columns (a corrupt shard)."""


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
    offsets: np.ndarray  # the samples + 1 sample offsets
    records: np.ndarray | None  # (samples, record size) uint8 when every sample is one record of that size


class Segment(NamedTuple):
    """The samples of a batch that one shard holds: their indices in it and their positions in the batch."""

    view: ShardView
    indices: np.ndarray  # int64 sample indices within the shard
    positions: np.ndarray | None  # their positions in the batch; None: the whole batch, in order


def _plan(name: str, encoding: str, size: int | None, length_index: int) -> _Plan:
    coder = get_mds_coder(encoding)
    kind, dtype, shape, python_int = OTHER, None, (), False
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


@dataclass(frozen=True)
class _Run:
    """Consecutive scalar columns of one width in a record, turned into their columns by one transpose."""

    names: tuple[str, ...]
    dtypes: tuple[np.dtype, ...]
    offset: int
    width: int


class ShardGather:
    """Batch reads of the shards of one schema (column names, encodings and sizes); see the module docstring."""

    def __init__(self, names: tuple[str, ...], encodings: tuple[str, ...], sizes: tuple[int | None, ...]) -> None:
        self.plans: list[_Plan] = []
        length_index = 0
        for name, encoding, size in zip(names, encodings, sizes):
            self.plans.append(_plan(name, encoding, size, -1 if size is not None else length_index))
            length_index += size is None
        self.num_lengths = length_index
        self.fixed_bytes = sum(size for size in sizes if size is not None)
        #: Bytes of every sample when all columns are fixed-size, else None.
        self.record_size = self.fixed_bytes if not self.num_lengths else None
        self.pairs = masked_columns(names, encodings)
        masks = set(self.pairs.values())
        #: The keys of a sample, in a per-sample read's order (mask columns folded into their values).
        self.keys = tuple(name for name in names if name not in masks)
        self._runs, self._singles = self._record_layout()

    # ------------------------------------------------------------------ entry point

    def view(self, buffer: memoryview, samples: int) -> ShardView:
        """The numpy view of a mapped shard (its offsets already checked by the reader)."""
        data = np.frombuffer(buffer, np.uint8) if len(buffer) else np.zeros(0, np.uint8)
        offsets = np.frombuffer(buffer, "<u4", samples + 1, 4).astype(np.int64)
        records = None
        size = self.record_size
        if size is not None and samples and size:
            first = int(offsets[0])
            if int(offsets[-1]) - first == samples * size and bool(np.all(np.diff(offsets) == size)):
                records = data[first : first + samples * size].reshape(samples, size)
        return ShardView(data, buffer, offsets, records)

    def gather(self, segments: Sequence[Segment], count: int) -> Columns:
        """The columns of a batch of ``count`` samples, taken from ``segments`` (one per shard).

        Raises:
            BatchLayoutError: some sample's bytes do not fit the columns (the caller finds which, by a
                per-sample read).
        """
        if all(segment.view.records is not None for segment in segments) and self.record_size:
            columns = self._from_records(segments, count)
        else:
            parts = [(segment.positions, self._from_layout(segment)) for segment in segments]
            columns = parts[0][1] if len(parts) == 1 and parts[0][0] is None else self._merge(parts, count)
        return self._fold_nulls(columns)

    # ------------------------------------------------------------------ fixed-size records

    def _record_layout(self) -> tuple[list[_Run], list[tuple[_Plan, int]]]:
        """Runs of same-width scalar columns, and every other column with its offset in the record."""
        runs: list[_Run] = []
        singles: list[tuple[_Plan, int]] = []
        if self.record_size is None:
            return runs, singles
        offset = 0
        for plan in self.plans:
            assert plan.size is not None
            scalar = plan.kind == FIXED and plan.shape == ()
            last = runs[-1] if runs else None
            if (
                scalar
                and last is not None
                and last.width == plan.size
                and last.offset + last.width * len(last.names) == offset
            ):
                runs[-1] = _Run((*last.names, plan.name), (*last.dtypes, plan.dtype), last.offset, last.width)  # type: ignore[arg-type]
            elif scalar:
                runs.append(_Run((plan.name,), (plan.dtype,), offset, plan.size))  # type: ignore[arg-type]
            else:
                singles.append((plan, offset))
            offset += plan.size
        return runs, singles

    def _from_records(self, segments: Sequence[Segment], count: int) -> Columns:
        size = self.record_size
        assert size is not None
        records = np.empty((count, size), np.uint8)
        for view, indices, positions in segments:
            assert view.records is not None
            if positions is None:
                np.take(view.records, indices, axis=0, out=records)
            else:
                records[positions] = np.take(view.records, indices, axis=0)
        columns: Columns = {}
        for run in self._runs:
            block = records[:, run.offset : run.offset + run.width * len(run.names)].view(f"<u{run.width}")
            transposed = np.empty((len(run.names), count), block.dtype)
            for start in range(0, count, _TRANSPOSE_ROWS):
                transposed[:, start : start + _TRANSPOSE_ROWS] = block[start : start + _TRANSPOSE_ROWS].T
            for row, (name, dtype) in enumerate(zip(run.names, run.dtypes)):
                columns[name] = transposed[row].view(dtype)
        for plan, offset in self._singles:
            assert plan.size is not None
            values = records[:, offset : offset + plan.size]
            if plan.kind == FIXED:
                assert plan.dtype is not None
                columns[plan.name] = np.ascontiguousarray(values).view(plan.dtype).reshape(count, *plan.shape)
            else:
                buffer = memoryview(records).cast("B")
                starts = range(offset, offset + count * size, size)
                columns[plan.name] = [plan.decode(buffer, start, start + plan.size) for start in starts]
        return columns

    # ------------------------------------------------------------------ any layout

    def _from_layout(self, segment: Segment) -> Columns:
        view, indices, _ = segment
        data = view.data
        starts = view.offsets[indices]
        ends = view.offsets[indices + 1]
        header = 4 * self.num_lengths
        bad = (starts + header > ends) | (ends > len(data))
        if bad.any():
            raise BatchLayoutError(f"batch positions {np.flatnonzero(bad)[:8].tolist()} are cut off")
        lengths = None
        if self.num_lengths:
            lengths = _gather_rows(data, starts, header).view("<u4").astype(np.int64)
            total = header + self.fixed_bytes + lengths.sum(axis=1)
        else:
            total = np.full(len(starts), self.fixed_bytes, np.int64)
        wrong = total != ends - starts
        if wrong.any():
            raise BatchLayoutError(f"batch positions {np.flatnonzero(wrong)[:8].tolist()} have the wrong size")
        columns: Columns = {}
        position = starts + header
        for plan in self.plans:
            if plan.length_index < 0:
                assert plan.size is not None
                width: np.ndarray | int = plan.size
            else:
                assert lengths is not None
                width = lengths[:, plan.length_index]
            stop = position + width
            columns[plan.name] = self._column(plan, view, position, stop)
            position = stop
        return columns

    def _column(self, plan: _Plan, view: ShardView, starts: np.ndarray, stops: np.ndarray) -> Column:
        if plan.kind == FIXED:
            assert plan.size is not None and plan.dtype is not None
            return _gather_rows(view.data, starts, plan.size).view(plan.dtype).reshape(len(starts), *plan.shape)
        if plan.kind == NDARRAY:
            stacked = _stacked_ndarrays(view.data, starts, stops, plan.dtype)
            if stacked is not None:
                return stacked
        buffer = view.buffer
        pairs = zip(starts.tolist(), stops.tolist())
        if plan.kind == STR:
            return [str(buffer[start:stop], "utf-8") for start, stop in pairs]
        if plan.kind == BYTES:
            return [bytes(buffer[start:stop]) for start, stop in pairs]
        decode = plan.decode
        return [decode(buffer, start, stop) for start, stop in pairs]

    # ------------------------------------------------------------------ putting a batch together

    def _merge(self, parts: list[tuple[np.ndarray | None, Columns]], count: int) -> Columns:
        """One batch from the columns of several shards' segments, each to its positions."""
        merged: Columns = {}
        for plan in self.plans:
            pieces = [(positions, columns[plan.name]) for positions, columns in parts]
            arrays = [piece for _, piece in pieces if isinstance(piece, np.ndarray)]
            if len(arrays) == len(pieces) and len({(a.dtype, a.shape[1:]) for a in arrays}) == 1:
                out = np.empty((count, *arrays[0].shape[1:]), arrays[0].dtype)
                for positions, piece in pieces:
                    out[positions if positions is not None else slice(None)] = piece
                merged[plan.name] = out
                continue
            values: list[Any] = [None] * count
            for positions, piece in pieces:
                items = _as_values(piece, plan)
                if positions is None:
                    values[:] = items
                else:
                    for position, item in zip(positions.tolist(), items):
                        values[position] = item
            merged[plan.name] = values
        return merged

    def _fold_nulls(self, columns: Columns) -> Columns:
        """Mask columns folded into their values (None where the mask is set), in the samples' key order."""
        plans = {plan.name: plan for plan in self.plans}
        for value, mask in self.pairs.items():
            flags = columns.pop(mask)
            nulls = flags != 0 if isinstance(flags, np.ndarray) else np.array([bool(flag) for flag in flags])
            if nulls.any():
                items = _as_values(columns[value], plans[value])
                for position in np.flatnonzero(nulls).tolist():
                    items[position] = None
                columns[value] = items
        return {key: columns[key] for key in self.keys}


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


def _as_values(column: Column, plan: _Plan) -> list[Any]:
    """A column's values as a per-sample read gives them (numpy scalars, Python ints, arrays, objects)."""
    if not isinstance(column, np.ndarray):
        return list(column)
    return column.tolist() if plan.python_int else list(column)


def _gather_rows(data: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``(len(starts), width)`` uint8: a copy of the ``width`` bytes at each start (all within ``data``)."""
    if width <= _FANCY_WIDTH or not len(starts):
        return data[starts[:, None] + np.arange(width)]
    # Row r of the window is data[r:r + width]: indexing it by the starts copies each value in one memcpy.
    window = as_strided(data, (len(data) - width + 1, width), (1, 1), writeable=False)
    return window[starts]


def _stacked_ndarrays(
    data: np.ndarray, starts: np.ndarray, stops: np.ndarray, dtype: np.dtype | None
) -> np.ndarray | None:
    """The ``ndarray`` values at ``starts..stops`` stacked, when all have one dtype and shape; else None.

    Layout of a value: [dtype code, unless configured] [shape header: ndim << 2 | width code] [ndim dims of that
    width] [values]. The values are stacked only when every header is byte for byte the first one's and every
    value is exactly as long as that header says, so nothing a per-value decode would refuse is stacked.
    """
    rows = len(starts)
    lead = 0 if dtype is not None else 1
    if not rows or bool(np.any(stops - starts < lead + 1)):
        return None
    first = int(starts[0])
    if dtype is None:
        dtype = _DTYPE_OF_CODE[int(data[first])]
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
    size = int(np.prod(shape)) * dtype.itemsize
    if not bool(np.all(stops - starts == head + size)):
        return None
    return _gather_rows(data, starts + head, size).view(dtype).reshape(rows, *shape)
