"""Encode Arrow record batches into MDS samples a column at a time, without a Python object per row.

Each column becomes one or more Arrow ``large_binary`` arrays holding its encoded bytes per row: numbers
are numpy views of Arrow's own buffers, strings and binary reuse Arrow's data buffer, arrays get a
vectorised shape header in front of their values. Arrow's ``binary_join_element_wise`` then lays the
pieces out row by row in MDS sample layout (§2.2: the uint32 sizes of the variable-size columns, then
each column's bytes, columns in name order), which ``MDSWriter.write_encoded_batch`` cuts into shards.
Arrays nested to any depth and Spark ML vectors become ``ndarray`` values through `arrow_arrays`. Only
``json`` columns build Python values (see ``json_values``); JSON text (a VARIANT) is checked and kept as it is.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.convert.arrow_arrays import BadRow, dense_vectors, nested_arrays, sparse_vectors
from streaming.convert.json_values import json_payloads
from streaming.convert.type_rules import FLOAT_DTYPES, array_element, is_ml_vector
from streaming.format.distinct import distinct
from streaming.format.mds.encodings import NDARRAY_DTYPE_CODES, NDArray, get_mds_coder

_INTEGER_DTYPES = {
    "int8": "<i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "<u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "int": "<i8",
}
_FLOAT_DTYPES = {"float32": "<f4", "float64": "<f8"}
_VERBATIM = ("bytes", "pil", "png", "jpeg", "pkl")
_EMPTY = pa.scalar(b"", pa.large_binary())


@dataclass
class _Piece:
    """One column's encoded bytes for a batch: arrays joined row-wise, and per-row sizes if variable-size."""

    arrays: list[pa.Array]
    sizes: np.ndarray | None


def _fixed_piece(values: np.ndarray, rows: int) -> _Piece:
    """A fixed-size column from a C-contiguous numpy array holding ``rows`` equal-size records."""
    data = np.ascontiguousarray(values)
    width = data.nbytes // rows
    offsets = np.arange(0, (rows + 1) * width, width, dtype=np.int64)
    array = pa.Array.from_buffers(pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return _Piece([array], None)


def _binary_piece(array: pa.Array) -> _Piece:
    """A variable-size column from a string or binary Arrow array (its data buffer is reused)."""
    array = array.cast(pa.large_binary())
    offsets = np.frombuffer(array.buffers()[1], np.int64, len(array) + 1, array.offset * 8)
    return _Piece([array], np.diff(offsets))


def _decimal_text(array: pa.Array) -> pa.Array:
    """A decimal array as Python's text of each value, with the column's scale (``1.50``, ``0E-10``), as upstream's
    ``str_decimal`` writes ``str(Decimal)``. Arrow's cast writes the same text but for one quirk of pyarrow 14
    (Databricks Runtime 15.4), a point after a lone digit (``2.E-10``), which is taken out; pyarrow 8 (14.3) has no
    such cast, and there each value goes through Python's ``Decimal``."""
    try:
        text = pc.cast(array, pa.string())
    except pa.ArrowNotImplementedError:
        return pa.array([None if value is None else str(value) for value in array.to_pylist()], pa.string())
    return pc.replace_substring_regex(text, pattern=r"^(-?[0-9])\.E", replacement=r"\1E")


def _numbers(array: pa.Array) -> np.ndarray:
    """The values of a numeric, boolean or temporal Arrow array as numpy numbers (zero-copy where possible)."""
    types = pa.types
    data_type = array.type
    if types.is_boolean(data_type):
        array = array.cast(pa.uint8())
    elif types.is_date32(data_type) or types.is_time32(data_type):
        array = array.cast(pa.int32())
    elif (
        types.is_date64(data_type)
        or types.is_timestamp(data_type)
        or types.is_duration(data_type)
        or types.is_time64(data_type)
    ):
        array = array.cast(pa.int64())
    elif not (types.is_integer(data_type) or types.is_floating(data_type)):
        raise TypeError(f"expected numbers, got Arrow type {data_type}")
    return array.to_numpy(zero_copy_only=False)


def _natural_dtype(data_type: pa.DataType) -> str:
    """The ndarray dtype name that stores values of ``data_type`` as they are."""
    types = pa.types
    if types.is_boolean(data_type):
        return "uint8"
    if types.is_date32(data_type) or types.is_time32(data_type):
        return "int32"
    if (
        types.is_date64(data_type)
        or types.is_timestamp(data_type)
        or types.is_duration(data_type)
        or types.is_time64(data_type)
    ):
        return "int64"
    return np.dtype(data_type.to_pandas_dtype()).name


def _zero_value(data_type: pa.DataType) -> pa.Scalar:
    """The value a NULL is stored as: the zero of the type (0, false, "", b"", an empty array, the epoch)."""
    types = pa.types
    if types.is_list(data_type) or types.is_large_list(data_type):
        return pa.scalar([], data_type)
    if types.is_string(data_type) or types.is_large_string(data_type):
        return pa.scalar("", data_type)
    if types.is_binary(data_type) or types.is_large_binary(data_type):
        return pa.scalar(b"", data_type)
    if types.is_boolean(data_type):
        return pa.scalar(False)
    if types.is_decimal(data_type):
        return pa.scalar(Decimal(0), data_type)
    if types.is_date32(data_type) or types.is_time32(data_type):
        return pa.scalar(0, pa.int32()).cast(data_type)
    if types.is_temporal(data_type):
        return pa.scalar(0, pa.int64()).cast(data_type)
    return pa.scalar(0, data_type)


def zero_filled(array: pa.Array) -> pa.Array:
    """``array`` with every NULL replaced by the zero value of its type."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return pc.fill_null(array, _zero_value(array.type)) if array.null_count else array


class ColumnValueError(ValueError):
    """A value that the column's encoding cannot store (a NULL, an out-of-range number, a wrong length)."""


class BatchEncoder:
    """Encode record batches with fixed columns into MDS sample bytes.

    Args:
        columns: column name → MDS encoding (any order; samples use name order, as ``MDSWriter``).
        where: prefix for error messages, e.g. ``"Spark partition 3, "``.
        nulls: value column → its NULL-mask column (``streaming.format.mds.nulls``); both are in ``columns``,
            the batch holds only the value column: its NULLs become the zero value and the mask is derived.
        parts: column → ``(ML vector column, part)`` for the columns a ``sparse`` vector is kept as
            (`streaming.convert.type_rules.expand_sparse`; part ``indices``, ``size`` or ``values``).
        json_text: columns whose values are JSON text (a VARIANT): a ``json`` column stores the text as it is.
    """

    def __init__(
        self,
        columns: dict[str, str],
        where: str = "",
        nulls: Mapping[str, str] | None = None,
        parts: Mapping[str, tuple[str, str]] | None = None,
        json_text: Collection[str] = (),
    ) -> None:
        self.columns = dict(columns)
        self.names = sorted(columns)
        self.where = where
        self.masks = {mask: value for value, mask in (nulls or {}).items()}
        self.parts = dict(parts or {})
        self.json_text = frozenset(json_text)
        for name in self.names:
            get_mds_coder(self.columns[name])  # an unknown encoding fails here, before any data

    def encode(self, batch: pa.RecordBatch, first_row: int = 0) -> tuple[memoryview, np.ndarray]:
        """Return ``(buffer, sizes)``: the batch's samples back to back, and each sample's byte size."""
        rows = batch.num_rows
        if rows == 0:
            return memoryview(b""), np.zeros(0, np.int64)
        pieces = []
        for name in self.names:
            source = self.masks.get(name) or self.parts.get(name, (name, ""))[0]
            index = batch.schema.get_field_index(source)
            if index < 0:
                raise KeyError(f"{self.where}the record batch has no column {source!r}; it has {batch.schema.names}.")
            array = batch.column(index)
            masked = name in self.masks.values()
            if name in self.masks:
                array = array.is_null()
            elif name in self.parts:
                pieces.append(self._vector_part(name, self.parts[name], array, first_row))
                continue
            elif masked and not is_ml_vector(array.type):  # a NULL vector is written as an empty one
                array = zero_filled(array)
            pieces.append(self._encode_column(name, self.columns[name], array, first_row, masked))
        arrays = []
        variable = [piece.sizes for piece in pieces if piece.sizes is not None]
        if variable:
            table = np.stack(variable, axis=1)
            if table.max() >= 1 << 32:
                raise ColumnValueError(
                    f"{self.where}a value of {table.max()} bytes is too large for an MDS sample "
                    f"(at most 4 GiB per column)."
                )
            arrays.extend(_fixed_piece(table.astype("<u4"), rows).arrays)
        for piece in pieces:
            arrays.extend(piece.arrays)
        joined = arrays[0] if len(arrays) == 1 else pc.binary_join_element_wise(*arrays, _EMPTY)
        offsets = np.frombuffer(joined.buffers()[1], np.int64, rows + 1, joined.offset * 8)
        data = joined.buffers()[2]
        buffer = memoryview(data)[int(offsets[0]) : int(offsets[-1])] if data is not None else memoryview(b"")
        return buffer, np.diff(offsets)

    # -- one column ------------------------------------------------------------------------------------
    def _encode_column(self, name: str, encoding: str, array: pa.Array, first_row: int, masked: bool = False) -> _Piece:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if encoding == "json" and name in self.json_text:
            return self._json_text(name, array, first_row)
        if encoding == "json":
            return _binary_piece(pa.array(json_payloads(array), pa.large_binary()))
        if array.null_count and not masked:
            self._null_error(name, encoding, array, first_row)
        rows = len(array)
        if encoding in _INTEGER_DTYPES:
            values = self._to_dtype(name, encoding, _numbers(array), np.dtype(_INTEGER_DTYPES[encoding]), first_row)
            return _fixed_piece(values, rows)
        if encoding in _FLOAT_DTYPES:
            return _fixed_piece(_numbers(array).astype(_FLOAT_DTYPES[encoding], copy=False), rows)
        if encoding == "str_int":
            return _binary_piece(pc.cast(pa.array(_numbers(array)), pa.string()))
        if encoding == "str_decimal":
            return _binary_piece(_decimal_text(array))
        if encoding == "str" or encoding in _VERBATIM:
            return _binary_piece(array.storage if isinstance(array, pa.ExtensionArray) else array)
        if encoding.split(":")[0] == "ndarray":
            return self._ndarray(name, encoding, array, first_row)
        raise ValueError(
            f"{self.where}column {name!r}: encoding {encoding!r} cannot be written from Arrow type {array.type}."
        )

    def _null_error(self, name: str, encoding: str, array: pa.Array, first_row: int) -> None:
        row = first_row + int(np.argmax(np.asarray(array.is_null())))
        raise ColumnValueError(
            f"{self.where}row {row}: column {name!r} (encoding {encoding!r}) holds a NULL, and MDS has no NULL. "
            f"Choices: fill or filter the NULLs first (df.na.fill, df.dropna, coalesce), or declare the column "
            f"as 'json' (columns={{{name!r}: 'json'}}), which stores NULL as JSON null."
        )

    def _to_dtype(self, name: str, encoding: str, values: np.ndarray, dtype: np.dtype, first_row: int) -> np.ndarray:
        """Cast integers to ``dtype``, refusing any value it cannot hold exactly."""
        if values.dtype == dtype:
            return values
        if not np.can_cast(values.dtype, dtype, "safe") and values.size:
            info = np.iinfo(dtype)
            outside = (values < info.min) | (values > info.max) if values.dtype.kind == "i" else values > info.max
            if outside.any():
                index = int(np.argmax(outside))
                raise ColumnValueError(
                    f"{self.where}row {first_row + index}: column {name!r} holds {values[index]}, outside the range "
                    f"of {encoding!r} ({info.min}..{info.max}); choose a wider encoding."
                )
        return values.astype(dtype)

    def _ndarray(self, name: str, encoding: str, array: pa.Array, first_row: int) -> _Piece:
        """``[dtype code][shape header]values`` per row, or fixed-size values with a static shape, from arrays of
        any depth (each row's shape) or ML vectors (densified, 1-D)."""
        coder = get_mds_coder(encoding)
        if not isinstance(coder, NDArray):
            raise ValueError(
                f"{self.where}column {name!r}: {encoding!r} is registered to {type(coder).__name__}, which is not "
                f"an ndarray coder, so it cannot be written from Arrow arrays."
            )
        vector = is_ml_vector(array.type)
        nested = array_element(array.type)
        if not vector and nested is None and not _is_list(array.type):
            raise ValueError(
                f"{self.where}column {name!r}: {encoding!r} needs an array column, got Arrow type {array.type}."
            )
        try:
            if vector:
                numbers, lengths = dense_vectors(array)
                shapes, natural = lengths[:, None], "float64"
            else:
                flat, shapes = nested_arrays(array, nested[1] if nested else 1)
                numbers, natural = _numbers(flat), _natural_dtype(flat.type)
        except BadRow as bad:
            raise self._bad_row(name, encoding, first_row, bad) from None
        dtype_name = coder.dtype or natural
        if dtype_name != natural and not (vector and dtype_name in FLOAT_DTYPES):
            raise ValueError(
                f"{self.where}column {name!r}: {encoding!r} stores {dtype_name} but the array elements are {natural}."
            )
        dtype = np.dtype(dtype_name).newbyteorder("<")
        values = np.ascontiguousarray(numbers.astype(dtype, copy=False))
        rows = len(array)
        counts = shapes.prod(axis=1)
        if coder.shape is not None:
            expected = int(np.prod(coder.shape))
            wrong = counts != expected
            if wrong.any():
                index = int(np.argmax(wrong))
                raise ColumnValueError(
                    f"{self.where}row {first_row + index}: column {name!r} holds an array of {counts[index]} "
                    f"elements but {encoding!r} needs exactly {expected}; use 'ndarray:{dtype_name}' for arrays "
                    f"of any length."
                )
            return _fixed_piece(values.reshape(rows, expected), rows)
        header, header_sizes = self._shape_headers(shapes, None if coder.dtype else NDARRAY_DTYPE_CODES[dtype_name])
        value_offsets = np.zeros(rows + 1, np.int64)
        np.cumsum(counts * dtype.itemsize, out=value_offsets[1:])
        value_array = pa.Array.from_buffers(
            pa.large_binary(), rows, [None, pa.py_buffer(value_offsets), pa.py_buffer(values)]
        )
        return _Piece([header, value_array], header_sizes + counts * dtype.itemsize)

    def _bad_row(self, name: str, encoding: str, first_row: int, bad: BadRow) -> ColumnValueError:
        if "NULL" in bad.reason:
            return ColumnValueError(
                f"{self.where}row {first_row + bad.row}: column {name!r} (encoding {encoding!r}) {bad.reason}, and "
                f"an ndarray has no NULL. Choices: fill or filter them first (e.g. transform(x, v -> coalesce(v, "
                f"0))), or declare the column as 'json' (columns={{{name!r}: 'json'}}), which keeps NULL as null."
            )
        return ColumnValueError(
            f"{self.where}row {first_row + bad.row}: column {name!r} (encoding {encoding!r}) {bad.reason}; declare "
            f"the column as 'json' (columns={{{name!r}: 'json'}}) to store such values."
        )

    def _vector_part(self, name: str, part: tuple[str, str], array: pa.Array, first_row: int) -> _Piece:
        """One of the columns a ``sparse`` ML vector column is kept as: its indices, values or size."""
        vector, which = part
        encoding = self.columns[name]
        if array.null_count:
            self._null_error(vector, encoding, _combined(array), first_row)
        try:
            indices, values, lengths, sizes = sparse_vectors(array)
        except BadRow as bad:
            raise self._bad_row(vector, encoding, first_row, bad) from None
        rows = len(array)
        if which == "size":
            return _fixed_piece(sizes.astype("<i4"), rows)
        numbers = indices.astype("<i4") if which == "indices" else values.astype(encoding.split(":")[1])
        numbers = np.ascontiguousarray(numbers.astype(numbers.dtype.newbyteorder("<"), copy=False))
        header, header_sizes = self._shape_headers(lengths[:, None], None)
        value_offsets = np.zeros(rows + 1, np.int64)
        np.cumsum(lengths * numbers.itemsize, out=value_offsets[1:])
        value_array = pa.Array.from_buffers(
            pa.large_binary(), rows, [None, pa.py_buffer(value_offsets), pa.py_buffer(numbers)]
        )
        return _Piece([header, value_array], header_sizes + lengths * numbers.itemsize)

    def _json_text(self, name: str, array: pa.Array, first_row: int) -> _Piece:
        """JSON text stored as it is (NULL as ``null``), each value checked to be JSON any reader can load."""
        if isinstance(array, pa.ExtensionArray):
            array = array.storage
        texts = array.to_pylist()
        for row, text in enumerate(texts):
            if text is None:
                continue
            try:
                json.loads(text)
            except ValueError as err:
                raise ColumnValueError(
                    f"{self.where}row {first_row + row}: column {name!r} holds JSON text that does not parse ({err})."
                ) from None
        payloads = [b"null" if text is None else text.encode("utf-8") for text in texts]
        return _binary_piece(pa.array(payloads, pa.large_binary()))

    @staticmethod
    def _shape_headers(shapes: np.ndarray, dtype_code: int | None) -> tuple[pa.Array, np.ndarray]:
        """Per-row ``[dtype code] (ndim << 2 | width) dims`` headers of ``(rows, ndim)`` shapes, built with numpy."""
        rows, ndim = shapes.shape
        largest = shapes.max(axis=1) if ndim else np.zeros(rows, np.int64)
        width_code = np.zeros(rows, np.int64)
        width_code[largest >= 1 << 8] = 1
        width_code[largest >= 1 << 16] = 2
        width_code[largest >= 1 << 32] = 3
        lead = 0 if dtype_code is None else 1
        sizes = lead + 1 + ndim * (1 << width_code)
        offsets = np.zeros(rows + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        out = np.zeros(int(offsets[-1]), np.uint8)
        starts = offsets[:-1]
        if dtype_code is not None:
            out[starts] = dtype_code
        out[starts + lead] = (ndim << 2) | width_code
        for code in distinct(width_code):
            chosen = np.flatnonzero(width_code == code)
            width = 1 << int(code)
            dims = shapes[chosen].astype(f"<u{width}").view(np.uint8).reshape(len(chosen), ndim * width)
            positions = (starts[chosen] + lead + 1)[:, None] + np.arange(ndim * width)
            out[positions] = dims
        header = pa.Array.from_buffers(pa.large_binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(out)])
        return header, sizes


def _is_list(data_type: pa.DataType) -> bool:
    types = pa.types
    return types.is_list(data_type) or types.is_large_list(data_type) or types.is_fixed_size_list(data_type)


def _combined(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
