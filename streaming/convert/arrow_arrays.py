"""Array columns of Arrow record batches as the values and shapes of MDS ``ndarray`` values, without a Python loop.

* Lists of numbers nested to any depth (`nested_arrays`): each row must be rectangular (every list at one level of
  the row as long as the others), its shape is its lengths level by level (``(0,)`` per level below an empty list),
  and its values are the leaves in row-major order.
* Spark ML vectors (`streaming.convert.type_rules.ML_VECTOR`): densified (`dense_vectors`: a dense vector's values
  as they are, a sparse one's placed at its indices in zeros of its size) or kept as indices, values and size
  (`sparse_vectors`; a dense vector then lists every position).

A NULL row (the value of a NULL-masked column) reads as the empty value; a value these forms cannot hold raises
`BadRow` naming the row's position in the array and why, for the encoder to report with its column.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SPARSE, DENSE = 0, 1


class BadRow(ValueError):
    """Row ``row`` (its position in the array) holds a value that the array's encoding cannot store."""

    def __init__(self, row: int, reason: str) -> None:
        super().__init__(f"row {row}: {reason}")
        self.row = row
        self.reason = reason


def _combined(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _lengths(array: pa.Array) -> np.ndarray:
    """Each list's length as int64 (0 for a NULL list)."""
    return np.asarray(pc.fill_null(pc.list_value_length(array), 0), np.int64)


def _first(flags: np.ndarray) -> int:
    return int(np.argmax(flags))


def nested_arrays(array: pa.Array | pa.ChunkedArray, depth: int) -> tuple[pa.Array, np.ndarray]:
    """``(leaves, shapes)`` of lists nested ``depth`` deep: the leaf values of all rows in order, and each row's
    shape as a ``(rows, depth)`` int64 array.

    Raises:
        BadRow: a row that is not rectangular, or that holds a NULL list or element below its top level.
    """
    level = _combined(array)
    rows = len(level)
    shapes = np.zeros((rows, depth), np.int64)
    owner = np.arange(rows)  # the row each list of the current level belongs to
    for axis in range(depth):
        if axis and level.null_count:
            raise BadRow(int(owner[_first(np.asarray(level.is_null()))]), "holds a NULL array inside it")
        lengths = _lengths(level)
        if axis:
            shortest, longest = _extremes(owner, lengths, rows)
            ragged = longest > shortest
            if ragged.any():
                row = _first(ragged)
                raise BadRow(
                    row,
                    f"is not rectangular: its arrays at depth {axis + 1} have lengths from {shortest[row]} to "
                    f"{longest[row]}",
                )
        # The row's length at this axis: that of its lists (all equal), 0 where it has none.
        shapes[owner, axis] = lengths
        owner = np.repeat(owner, lengths)
        level = pc.list_flatten(level)
    if level.null_count:
        raise BadRow(int(owner[_first(np.asarray(level.is_null()))]), "holds a NULL element")
    return level, shapes


def nested_row_flags(array: pa.Array | pa.ChunkedArray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """``(nulls inside, ragged)``: which rows of lists nested ``depth`` deep hold a NULL below their top level, and
    which are not rectangular (the rows `nested_arrays` refuses), as bool arrays."""
    level = _combined(array)
    rows = len(level)
    nulls = np.zeros(rows, bool)
    ragged = np.zeros(rows, bool)
    owner = np.arange(rows)
    for axis in range(depth):
        if axis and level.null_count:
            nulls[owner[np.asarray(level.is_null())]] = True
        lengths = _lengths(level)
        if axis:
            shortest, longest = _extremes(owner, lengths, rows)
            ragged |= longest > shortest
        owner = np.repeat(owner, lengths)
        level = pc.list_flatten(level)
    if level.null_count:
        nulls[owner[np.asarray(level.is_null())]] = True
    return nulls, ragged


def _extremes(owner: np.ndarray, lengths: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The shortest and longest of each row's lists (``lengths``, owned by rows ``owner``); 0 and 0 for none."""
    longest = np.zeros(rows, np.int64)
    shortest = np.zeros(rows, np.int64)
    if len(lengths):
        np.maximum.at(longest, owner, lengths)
        shortest[:] = np.iinfo(np.int64).max
        np.minimum.at(shortest, owner, lengths)
        shortest[shortest == np.iinfo(np.int64).max] = 0
    return shortest, longest


class _Vectors:
    """The parts of a Spark ML vector array, NULL rows as empty dense vectors, checked for consistency."""

    def __init__(self, array: pa.Array | pa.ChunkedArray) -> None:
        array = _combined(array)
        rows = len(array)
        valid = np.asarray(array.is_valid()) if array.null_count else np.ones(rows, bool)
        kind, size, indices, values = array.flatten()
        self.kind = np.where(valid, np.asarray(pc.fill_null(kind, DENSE), np.int64), DENSE)
        self.size = np.asarray(pc.fill_null(size, 0), np.int64)
        self.value_lengths = _lengths(values)
        self.index_lengths = _lengths(indices)
        self.values = np.asarray(pc.list_flatten(values), np.float64)
        self.indices = np.asarray(pc.list_flatten(indices), np.int64)
        self.value_rows = np.repeat(np.arange(rows), self.value_lengths)
        self.index_rows = np.repeat(np.arange(rows), self.index_lengths)
        sparse = self.kind == SPARSE
        unknown = valid & ~sparse & (self.kind != DENSE)
        if unknown.any():
            row = _first(unknown)
            raise BadRow(row, f"is not an ML vector: its type is {self.kind[row]} (0 sparse, 1 dense)")
        bad = sparse & (np.asarray(size.is_null()) | (self.size < 0) | (self.index_lengths != self.value_lengths))
        if bad.any():
            row = _first(bad)
            raise BadRow(
                row,
                f"is a sparse vector whose size ({size[row].as_py()}), {self.index_lengths[row]} indices and "
                f"{self.value_lengths[row]} values do not fit together",
            )
        # The indices of the sparse vectors, in order (a dense vector's are not used).
        sparse_entries = sparse[self.index_rows]
        self.sparse_indices = self.indices[sparse_entries]
        index_rows = self.index_rows[sparse_entries]
        outside = (self.sparse_indices < 0) | (self.sparse_indices >= self.size[index_rows])
        if outside.any():
            row = int(index_rows[_first(outside)])
            raise BadRow(
                row, f"is a sparse vector of size {self.size[row]} with an index outside 0..{self.size[row] - 1}"
            )
        self.sparse = sparse
        #: Each vector's size (a dense one: its number of values; a NULL row: 0).
        self.lengths = np.where(sparse, self.size, self.value_lengths)


def dense_vectors(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, lengths)``: every vector as its dense float64 values, back to back, and each one's size."""
    vectors = _Vectors(array)
    starts = np.zeros(len(vectors.lengths) + 1, np.int64)
    np.cumsum(vectors.lengths, out=starts[1:])
    out = np.zeros(int(starts[-1]), np.float64)
    value_starts = np.zeros(len(vectors.value_lengths) + 1, np.int64)
    np.cumsum(vectors.value_lengths, out=value_starts[1:])
    # Where each stored value goes: the next position of a dense vector, or its index in a sparse one.
    within = np.arange(len(vectors.values)) - value_starts[vectors.value_rows]
    sparse = vectors.sparse[vectors.value_rows]
    within[sparse] = vectors.sparse_indices  # in the same order as their values
    out[starts[vectors.value_rows] + within] = vectors.values
    return out, vectors.lengths


def sparse_vectors(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(indices, values, lengths, sizes)``: every vector's positions and values back to back (a dense vector's
    positions are 0..n-1), each one's number of them, and each one's size.

    A NULL row has no place here (an explicit encoding refuses NULLs before this is called).
    """
    vectors = _Vectors(array)
    value_starts = np.zeros(len(vectors.value_lengths) + 1, np.int64)
    np.cumsum(vectors.value_lengths, out=value_starts[1:])
    indices = np.arange(len(vectors.values)) - value_starts[vectors.value_rows]
    indices[vectors.sparse[vectors.value_rows]] = vectors.sparse_indices
    return indices.astype(np.int32), vectors.values, vectors.value_lengths, vectors.lengths
