"""Arrow type → MDS encoding, for converters that read Arrow without Spark (the command line's `convert`).

It applies the table of :mod:`streaming.spark.schema` to the Arrow type each Spark type arrives as, so a
Parquet file converted here and the same file converted by ``dataframe_to_mds`` give the same encodings and
the same bytes. Arrow has a few types Spark lacks; they get the nearest lossless rule: unsigned integers
keep their own width (``uint8`` … ``uint64``), ``float16`` is widened to ``float32``, ``date64`` is stored
as days like ``date32``, timestamps of any unit are microseconds (Spark's unit), durations microseconds and
times of day nanoseconds, dictionary-encoded columns their value type, and ``large_*``/``fixed_size_*``
variants as the plain ones. `normalize_batch` casts a record batch to those Spark-equivalent types before
``BatchEncoder`` encodes it. Imports pyarrow only (no pyspark).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

# The same choices as streaming.spark.schema (which imports pyspark); tests/cli/test_arrow_schema.py checks so.
INTEGER_ENCODINGS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int", "str_int")
BINARY_ENCODINGS = ("bytes", "pil", "png", "jpeg", "pkl")
_SIGNED = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}
_UNSIGNED = {8: "uint8", 16: "uint16", 32: "uint32", 64: "uint64"}


def spark_equivalent(data_type: pa.DataType) -> pa.DataType:
    """The Arrow type Spark would hand over for a column of ``data_type`` (nested types included)."""
    types = pa.types
    if types.is_dictionary(data_type):
        return spark_equivalent(data_type.value_type)
    if types.is_float16(data_type):
        return pa.float32()
    if types.is_date64(data_type):
        return pa.date32()
    if types.is_timestamp(data_type):
        return pa.timestamp("us", tz=data_type.tz)
    if types.is_duration(data_type):
        return pa.duration("us")
    if types.is_time(data_type):
        return pa.time64("ns")
    if types.is_large_string(data_type) or types.is_string_view(data_type):
        return pa.string()
    if types.is_large_binary(data_type) or types.is_fixed_size_binary(data_type) or types.is_binary_view(data_type):
        return pa.binary()
    if types.is_list(data_type) or types.is_large_list(data_type) or types.is_fixed_size_list(data_type):
        return pa.list_(spark_equivalent(data_type.value_type))
    if types.is_struct(data_type):
        return pa.struct([field.with_type(spark_equivalent(field.type)) for field in data_type])
    if types.is_map(data_type):
        return pa.map_(spark_equivalent(data_type.key_type), spark_equivalent(data_type.item_type))
    return data_type


def _element_dtype(data_type: pa.DataType) -> str | None:
    """The fixed-width numpy dtype of one value (schema.py's ``element_dtype`` for Arrow types)."""
    types = pa.types
    if types.is_boolean(data_type):
        return "uint8"
    if types.is_signed_integer(data_type):
        return _SIGNED[data_type.bit_width]
    if types.is_unsigned_integer(data_type):
        return _UNSIGNED[data_type.bit_width]
    if types.is_float32(data_type):
        return "float32"
    if types.is_float64(data_type):
        return "float64"
    if types.is_date32(data_type):
        return "int32"
    if types.is_timestamp(data_type) or types.is_duration(data_type) or types.is_time64(data_type):
        return "int64"
    return None


def default_encoding(data_type: pa.DataType, column: str) -> str:
    """The encoding a column of Arrow type ``data_type`` gets when the user does not choose one."""
    data_type = spark_equivalent(data_type)
    if pa.types.is_union(data_type) or isinstance(data_type, pa.ExtensionType):
        raise ValueError(
            f"Cannot convert column {column!r}: Arrow type {data_type} has no lossless MDS form; convert it "
            f"to a plain type first, or leave the column out of --columns."
        )
    scalar = _element_dtype(data_type)
    if scalar is not None:
        return scalar
    if pa.types.is_decimal(data_type):
        return "str_decimal"
    if pa.types.is_string(data_type):
        return "str"
    if pa.types.is_binary(data_type):
        return "bytes"
    if pa.types.is_list(data_type):
        inner = _element_dtype(data_type.value_type)
        if inner is not None:
            return f"ndarray:{inner}"
    return "json"


def resolve_columns(schema: pa.Schema, columns: Mapping[str, str | None] | Sequence[str] | None) -> dict[str, str]:
    """``{name: encoding}`` for every column to write, checked as ``streaming.spark.schema.resolve_columns``."""
    names = schema.names
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if columns is None:
        if duplicates:
            raise ValueError(f"The input has duplicate column names {duplicates}; pick columns with --columns.")
        columns = names
    requested = dict(columns) if isinstance(columns, Mapping) else dict.fromkeys(columns)
    if not requested:
        raise ValueError("--columns is empty: name at least one column to write.")
    resolved = {}
    for name, encoding in requested.items():
        if name not in names:
            raise ValueError(f"Column {name!r} is not in the input; its columns are {names}.")
        data_type = schema.field(name).type
        default = default_encoding(data_type, name)
        if encoding is None:
            resolved[name] = default
            continue
        choices = allowed_encodings(data_type, name)
        if not _is_allowed(encoding, default, choices):
            raise ValueError(
                f"Column {name!r} of Arrow type {data_type} cannot be stored as {encoding!r}; "
                f"valid choices: {', '.join(choices)}."
            )
        resolved[name] = encoding
    return resolved


def allowed_encodings(data_type: pa.DataType, column: str) -> list[str]:
    """Every encoding a user may declare for a column of ``data_type`` (the default first)."""
    default = default_encoding(data_type, column)
    equivalent = spark_equivalent(data_type)
    if default in INTEGER_ENCODINGS:
        choices = [default, *INTEGER_ENCODINGS]
    elif pa.types.is_float32(equivalent):
        choices = ["float32", "float64"]
    elif pa.types.is_binary(equivalent):
        choices = list(BINARY_ENCODINGS)
    elif default.startswith("ndarray:"):
        choices = [default, "ndarray", f"{default}:<shape>"]
    else:
        choices = [default]
    choices.append("json")
    return list(dict.fromkeys(choices))


def _is_allowed(encoding: str, default: str, choices: list[str]) -> bool:
    if encoding in choices:
        return True
    if default.startswith("ndarray:"):
        parts = encoding.split(":")
        if len(parts) == 3 and f"{parts[0]}:{parts[1]}" == default:
            try:
                return all(int(dim) >= 1 for dim in parts[2].split(","))
            except ValueError:
                return False
    return False


def normalize_batch(batch: pa.RecordBatch, columns: Mapping[str, str]) -> pa.RecordBatch:
    """The batch's ``columns`` cast to the types Spark would deliver (see the module docstring)."""
    arrays = []
    fields = []
    for name in columns:
        array = batch.column(batch.schema.get_field_index(name))
        target = spark_equivalent(array.type)
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if target != array.type:
            array = array.cast(target)
        arrays.append(array)
        fields.append(pa.field(name, target))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
