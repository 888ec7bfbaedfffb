"""Column type → MDS encoding: the default for every type, the encodings a user may choose, and refusals.

The one owner of the rules. They are stated over Arrow types, which is what every engine hands a task: the
command line reads Arrow directly, and Spark delivers each of its types as the Arrow type
`streaming.spark.schema` names for it (so a Parquet file converted either way gives the same bytes). Every
type is either stored losslessly or refused before anything is written, naming the column and the choices.
What is read back (``LocalDataset``/``StreamingDataset``):

=============================  =================  ===========================================================
Spark type (Arrow type)        default encoding   value read back
=============================  =================  ===========================================================
ByteType / ShortType           ``int8``/``int16`` ``numpy.int8``/``numpy.int16`` (upstream wrote uint8/uint16,
(int8 / int16)                                    which wrapped negative values)
IntegerType / LongType         ``int32``/``int64`` numpy scalar
FloatType / DoubleType         ``float32``/``float64`` numpy scalar; NaN payloads and -0.0 kept bit for bit
BooleanType (bool)             ``uint8``          ``1`` for true, ``0`` for false
DecimalType(p, s), any p       ``str_decimal``    ``decimal.Decimal`` with the exact digits and scale
StringType, Char, Varchar      ``str``            ``str``
BinaryType                     ``bytes``          ``bytes``
DateType (date32)              ``int32``          days since 1970-01-01 (negative before)
TimestampType (timestamp tz)   ``int64``          microseconds since 1970-01-01T00:00:00Z (an instant)
TimestampNTZType (timestamp)   ``int64``          microseconds since 1970-01-01T00:00:00 of the wall clock
TimeType (time64)              ``int64``          nanoseconds since midnight
DayTimeIntervalType (duration) ``int64``          microseconds
YearMonthIntervalType          ``int32``          months
CalendarIntervalType           ``json``           ``{"months": m, "days": d, "microseconds": us}``
ArrayType(numeric, boolean,    ``ndarray:<dtype>`` 1-D ``numpy.ndarray`` of the element's dtype above
date, timestamp, time,                            (an empty array has shape ``(0,)``)
day-time interval) (list)
any other ArrayType, MapType,  ``json``           the JSON rule of `streaming.convert.json_values`
StructType, NullType
VariantType, GeometryType,     refused            convert first (``to_json``, ``st_asbinary``, a struct)
GeographyType, user-defined
(unions, extension types)
=============================  =================  ===========================================================

Arrow has a few types Spark lacks; they get the nearest lossless rule: unsigned integers keep their own
width (``uint8`` … ``uint64``), ``float16`` is widened to ``float32``, ``date64`` is stored as days like
``date32``, timestamps of any unit as microseconds (Spark's unit), durations as microseconds and times of day
as nanoseconds, dictionary-encoded columns as their value type, and ``large_*``/``fixed_size_*``/view
variants as the plain ones (`spark_equivalent`; `normalize_batch` casts a batch to those types).

NULLs: MDS has no NULL. A column stored as ``json`` keeps NULL as ``null`` at any depth; every other encoding
has no spare value for it, so with default encodings a column that holds NULLs gets a NULL-mask column
(`streaming.convert.null_plan`), and with an encoding the user chose a NULL stops the conversion naming the
column and the row.

User-given encodings replace the defaults when these rules allow them: any integer encoding (``int8`` …
``uint64``, ``int``, ``str_int``) for integer, boolean, date, time, timestamp and interval columns (values
are range-checked as they are written, so nothing wraps); ``float64`` for a 32-bit float column;
``ndarray``, ``ndarray:<dtype>`` or ``ndarray:<dtype>:<shape>`` (each array then has exactly
``prod(shape)`` elements and is reshaped) for arrays; ``pil``, ``png``, ``jpeg`` and ``pkl`` for binary
columns (the bytes are stored as they are, as upstream does); and ``json`` for every type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

INTEGER_ENCODINGS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int", "str_int")
BINARY_ENCODINGS = ("bytes", "pil", "png", "jpeg", "pkl")
_SIGNED = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}
_UNSIGNED = {8: "uint8", 16: "uint16", 32: "uint32", 64: "uint64"}


@dataclass(frozen=True)
class Wording:
    """How messages name the input, its types and the argument choosing columns (each engine's own words)."""

    #: The input's name in messages: ``"the DataFrame"``, ``"the input"``.
    source: str = "the input"
    #: The argument that chooses columns: ``"`columns`"``, ``"--columns"``.
    argument: str = "--columns"
    #: A column's type as the user knows it, e.g. ``"Spark type float"``, from its name and Arrow type.
    describe: Callable[[str, pa.DataType], str] = lambda column, data_type: f"Arrow type {data_type}"


ARROW_WORDING = Wording()


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
    if types.is_large_string(data_type) or _is_view(data_type, "string"):
        return pa.string()
    if types.is_large_binary(data_type) or types.is_fixed_size_binary(data_type) or _is_view(data_type, "binary"):
        return pa.binary()
    if types.is_list(data_type) or types.is_large_list(data_type) or types.is_fixed_size_list(data_type):
        return pa.list_(spark_equivalent(data_type.value_type))
    if types.is_struct(data_type):
        return pa.struct([field.with_type(spark_equivalent(field.type)) for field in data_type])
    if types.is_map(data_type):
        return pa.map_(spark_equivalent(data_type.key_type), spark_equivalent(data_type.item_type))
    return data_type


def _is_view(data_type: pa.DataType, kind: str) -> bool:
    """Whether ``data_type`` is Arrow's ``string_view``/``binary_view`` (pyarrow 16+; DBR 14-15 ship 14)."""
    check = getattr(pa.types, f"is_{kind}_view", None)
    return check is not None and check(data_type)


def element_dtype(data_type: pa.DataType) -> str | None:
    """The fixed-width numpy dtype that stores one value of ``data_type``, or None if there is none."""
    types = pa.types
    data_type = spark_equivalent(data_type)
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


def _check_storable(data_type: pa.DataType, column: str, wording: Wording, path: str = "") -> None:
    """Refuse a type nothing can store, looking inside lists, maps and structs."""
    where = f"column {column!r}" + (f" at {path}" if path else "")
    types = pa.types
    if types.is_union(data_type) or isinstance(data_type, pa.ExtensionType):
        raise ValueError(
            f"Cannot convert {where}: {wording.describe(column, data_type)} has no lossless MDS form; convert it to a "
            f"plain type first, or leave the column out of {wording.argument}."
        )
    if types.is_list(data_type) or types.is_large_list(data_type) or types.is_fixed_size_list(data_type):
        _check_storable(data_type.value_type, column, wording, f"{path}[]")
    elif types.is_map(data_type):
        _check_storable(data_type.key_type, column, wording, f"{path}{{key}}")
        _check_storable(data_type.item_type, column, wording, f"{path}{{value}}")
    elif types.is_struct(data_type):
        names = [field.name for field in data_type]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(
                f"Cannot convert {where}: the struct has duplicate field names {duplicates}, which a "
                f"JSON object cannot hold; rename them first."
            )
        for field in data_type:
            _check_storable(field.type, column, wording, f"{path}.{field.name}")


def default_encoding(data_type: pa.DataType, column: str, wording: Wording = ARROW_WORDING) -> str:
    """The encoding a column of ``data_type`` gets when the user does not choose one."""
    _check_storable(data_type, column, wording)
    data_type = spark_equivalent(data_type)
    scalar = element_dtype(data_type)
    if scalar is not None:
        return scalar
    if pa.types.is_decimal(data_type):
        return "str_decimal"
    if pa.types.is_string(data_type):
        return "str"
    if pa.types.is_binary(data_type):
        return "bytes"
    if pa.types.is_list(data_type):
        inner = element_dtype(data_type.value_type)
        if inner is not None:
            return f"ndarray:{inner}"
    return "json"


def allowed_encodings(data_type: pa.DataType, column: str, wording: Wording = ARROW_WORDING) -> list[str]:
    """Every encoding a user may declare for a column of ``data_type`` (the default first)."""
    default = default_encoding(data_type, column, wording)
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


def is_allowed(encoding: str, data_type: pa.DataType, column: str, wording: Wording = ARROW_WORDING) -> bool:
    """Whether a user may store a column of ``data_type`` as ``encoding`` (a shaped ndarray included)."""
    if encoding in allowed_encodings(data_type, column, wording):
        return True
    default = default_encoding(data_type, column, wording)
    if default.startswith("ndarray:"):
        parts = encoding.split(":")
        return len(parts) == 3 and f"{parts[0]}:{parts[1]}" == default and _valid_shape(parts[2])
    return False


def _valid_shape(text: str) -> bool:
    try:
        return all(int(dim) >= 1 for dim in text.split(","))
    except ValueError:
        return False


def resolve_columns(
    fields: Sequence[tuple[str, pa.DataType]],
    columns: Mapping[str, str | None] | Sequence[str] | None,
    wording: Wording = ARROW_WORDING,
) -> dict[str, str]:
    """Check ``columns`` against the input's ``(name, Arrow type)`` fields; return ``{name: encoding}`` to write.

    ``None`` means every column with its default encoding; a list of names picks columns with their defaults;
    a mapping gives explicit encodings (None for a column's default), each checked against its type.
    """
    names = [name for name, _ in fields]
    types = dict(fields)
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if columns is None:
        if duplicates:
            raise ValueError(
                f"{wording.source[0].upper()}{wording.source[1:]} has duplicate column names {duplicates}; rename "
                f"them or pick columns with {wording.argument}."
            )
        columns = names
    if isinstance(columns, str) or not isinstance(columns, (Mapping, Sequence)):
        raise TypeError(
            f"{wording.argument} must be a dict of column name -> MDS encoding or a list of column names, got "
            f"{columns!r}."
        )
    requested = dict(columns) if isinstance(columns, Mapping) else dict.fromkeys(columns)
    if not requested:
        raise ValueError(f"{wording.argument} is empty: name at least one column to write.")
    resolved = {}
    for name, encoding in requested.items():
        if name not in types:
            raise ValueError(f"Column {name!r} is not in {wording.source}; its columns are {names}.")
        if name in duplicates:
            raise ValueError(f"Column name {name!r} appears more than once in {wording.source}; rename the copies.")
        data_type = types[name]
        if encoding is None:
            resolved[name] = default_encoding(data_type, name, wording)
            continue
        if not isinstance(encoding, str) or not is_allowed(encoding, data_type, name, wording):
            raise ValueError(
                f"Column {name!r} of {wording.describe(name, data_type)} cannot be stored as {encoding!r}; valid "
                f"choices: {', '.join(allowed_encodings(data_type, name, wording))}."
            )
        resolved[name] = encoding
    return resolved


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
