"""Spark SQL type → MDS encoding: the default for every type, the encodings a user may choose, and refusals.

Every Spark type is either stored losslessly or refused before any job runs, with a message that names
the column and the choices. The rules (read back with ``LocalDataset``/``StreamingDataset``):

=============================  =================  ===========================================================
Spark type                     default encoding   value read back
=============================  =================  ===========================================================
ByteType / ShortType           ``int8``/``int16`` ``numpy.int8``/``numpy.int16`` (upstream wrote uint8/uint16,
                                                  which wrapped negative values)
IntegerType / LongType         ``int32``/``int64`` numpy scalar
FloatType / DoubleType         ``float32``/``float64`` numpy scalar; NaN payloads and -0.0 kept bit for bit
BooleanType                    ``uint8``          ``1`` for true, ``0`` for false
DecimalType(p, s), any p       ``str_decimal``    ``decimal.Decimal`` with the exact digits and scale
StringType, Char, Varchar      ``str``            ``str``
BinaryType                     ``bytes``          ``bytes``
DateType                       ``int32``          days since 1970-01-01 (negative before)
TimestampType                  ``int64``          microseconds since 1970-01-01T00:00:00Z (an instant)
TimestampNTZType               ``int64``          microseconds since 1970-01-01T00:00:00 of the wall clock
TimeType                       ``int64``          nanoseconds since midnight
DayTimeIntervalType            ``int64``          microseconds
YearMonthIntervalType          ``int32``          months
CalendarIntervalType           ``json``           ``{"months": m, "days": d, "microseconds": us}``
ArrayType(numeric, boolean,    ``ndarray:<dtype>`` 1-D ``numpy.ndarray`` of the element's dtype above
date, timestamp, time,                            (an empty array has shape ``(0,)``)
day-time interval)
any other ArrayType, MapType,  ``json``           the JSON rule below
StructType, NullType
VariantType, GeometryType,     refused            convert first (``to_json``, ``st_asbinary``, a struct)
GeographyType, user-defined
=============================  =================  ===========================================================

JSON rule (the ``json`` encoding, at any depth): NULL → ``null``; booleans, integers and floats as
themselves (NaN and infinities as Python's ``json`` writes them); decimals as strings of their exact
digits; strings as strings; binary as standard base64 text; dates, timestamps, times and intervals as the
integers in the table above; arrays as lists; structs as objects in field order; maps with string keys as
objects, other maps as lists of ``[key, value]`` pairs.

NULLs: MDS has no NULL. A column stored as ``json`` keeps NULL as ``null``, at the top level and inside
arrays, maps and structs. Every other encoding has no spare value for NULL; with default encodings
(``dataframe_to_mds(nulls="mask")``, see ``streaming.spark.null_plan``) a column that holds NULLs is written
with a ``uint8`` NULL-mask column ``<name>__is_null`` and the encoding's zero value in place of NULL, which
our readers fold back into ``None``, and an ``ndarray`` column with NULL elements is written as ``json``.
With ``nulls="error"``, or an encoding the user chose, a NULL there stops the conversion with an error
naming the column and the row; the choices are to fill or filter the NULLs in Spark, or to declare the
column ``json``.

User-given encodings replace the defaults when the table allows them: any integer encoding (``int8`` …
``uint64``, ``int``, ``str_int``) for integer, boolean, date, time, timestamp and interval columns (values
are range-checked as they are written, so nothing wraps); ``float64`` for FloatType; ``ndarray``,
``ndarray:<dtype>`` or ``ndarray:<dtype>:<shape>`` (each array then has exactly ``prod(shape)`` elements
and is reshaped) for arrays; ``pil``, ``png``, ``jpeg`` and ``pkl`` for BinaryType (the bytes are stored
as they are, as upstream does); and ``json`` for every type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import types as T

INTEGER_ENCODINGS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "int", "str_int")
BINARY_ENCODINGS = ("bytes", "pil", "png", "jpeg", "pkl")

# Integer-like Spark types and the dtype that stores each one losslessly.
_INTEGER_LIKE: tuple[tuple[type[T.DataType], str], ...] = (
    (T.ByteType, "int8"),
    (T.ShortType, "int16"),
    (T.IntegerType, "int32"),
    (T.LongType, "int64"),
    (T.BooleanType, "uint8"),
    (T.DateType, "int32"),
    (T.TimestampType, "int64"),
    (T.TimestampNTZType, "int64"),
    (T.DayTimeIntervalType, "int64"),
    (T.YearMonthIntervalType, "int32"),
)
_FLOATS: tuple[tuple[type[T.DataType], str], ...] = ((T.FloatType, "float32"), (T.DoubleType, "float64"))


def _time_type() -> type[T.DataType] | None:
    """``TimeType`` exists from Spark 4.1 on."""
    return getattr(T, "TimeType", None)


def _refusal_hint(data_type: T.DataType) -> str | None:
    """Why a type cannot be stored, with what to do instead; None when the type can be stored."""
    name = type(data_type).__name__
    if name == "VariantType":
        return "convert it first, e.g. F.to_json(col) for its JSON text, then store that string"
    if name in ("GeometryType", "GeographyType"):
        return "convert it first, e.g. F.st_asbinary(col) for WKB bytes (and keep the SRID in another column)"
    if isinstance(data_type, T.UserDefinedType):
        return (
            f"convert it first to its SQL type ({data_type.sqlType().simpleString()}) or to a plain column, "
            f"e.g. with pyspark.ml.functions.vector_to_array for ML vectors"
        )
    return None


def element_dtype(data_type: T.DataType) -> str | None:
    """The fixed-width numpy dtype that stores one value of ``data_type``, or None if there is none."""
    for spark_type, dtype in _INTEGER_LIKE + _FLOATS:
        if isinstance(data_type, spark_type):
            return dtype
    time_type = _time_type()
    if time_type is not None and isinstance(data_type, time_type):
        return "int64"
    return None


def _check_storable(data_type: T.DataType, column: str, path: str = "") -> None:
    """Raise for a type nothing can store, looking inside arrays, maps and structs."""
    where = f"column {column!r}" + (f" at {path}" if path else "")
    hint = _refusal_hint(data_type)
    if hint is not None:
        raise ValueError(
            f"Cannot convert {where}: Spark type {data_type.simpleString()} has no lossless MDS "
            f"form; {hint}, or leave the column out of `columns`."
        )
    if isinstance(data_type, T.ArrayType):
        _check_storable(data_type.elementType, column, f"{path}[]")
    elif isinstance(data_type, T.MapType):
        _check_storable(data_type.keyType, column, f"{path}{{key}}")
        _check_storable(data_type.valueType, column, f"{path}{{value}}")
    elif isinstance(data_type, T.StructType):
        names = [field.name for field in data_type.fields]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(
                f"Cannot convert {where}: the struct has duplicate field names {duplicates}, which a "
                f"JSON object cannot hold; rename them first."
            )
        for field in data_type.fields:
            _check_storable(field.dataType, column, f"{path}.{field.name}")
    elif path and isinstance(data_type, T.YearMonthIntervalType):
        raise ValueError(
            f"Cannot convert {where}: year-month intervals are only supported as top-level "
            f"columns; convert it to months first, e.g. extract(YEAR FROM x) * 12 + "
            f"extract(MONTH FROM x)."
        )


def default_encoding(data_type: T.DataType, column: str) -> str:
    """The encoding a column of ``data_type`` gets when the user does not choose one."""
    _check_storable(data_type, column)
    scalar = element_dtype(data_type)
    if scalar is not None:
        return scalar
    if isinstance(data_type, T.DecimalType):
        return "str_decimal"
    if isinstance(data_type, (T.StringType, T.CharType, T.VarcharType)):
        return "str"
    if isinstance(data_type, T.BinaryType):
        return "bytes"
    if isinstance(data_type, T.ArrayType):
        inner = element_dtype(data_type.elementType)
        if inner is not None:
            return f"ndarray:{inner}"
    return "json"


def allowed_encodings(data_type: T.DataType, column: str) -> list[str]:
    """Every encoding a user may declare for a column of ``data_type`` (the default first)."""
    default = default_encoding(data_type, column)
    if default in INTEGER_ENCODINGS:
        choices = [default, *INTEGER_ENCODINGS]
    elif isinstance(data_type, T.FloatType):
        choices = ["float32", "float64"]
    elif isinstance(data_type, T.BinaryType):
        choices = list(BINARY_ENCODINGS)
    elif default.startswith("ndarray:"):
        choices = [default, "ndarray", f"{default}:<shape>"]
    else:
        choices = [default]
    choices.append("json")
    return list(dict.fromkeys(choices))


def _is_allowed(encoding: str, data_type: T.DataType, column: str) -> bool:
    default = default_encoding(data_type, column)
    if encoding in allowed_encodings(data_type, column):
        return True
    if default.startswith("ndarray:"):
        parts = encoding.split(":")
        return len(parts) == 3 and f"{parts[0]}:{parts[1]}" == default and _valid_shape(parts[2])
    return False


def _valid_shape(text: str) -> bool:
    try:
        return all(int(dim) >= 1 for dim in text.split(","))
    except ValueError:
        return False


def resolve_columns(schema: T.StructType, columns: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """Check ``columns`` against ``schema`` and return ``{name: encoding}`` for every column to write.

    ``None`` means every column with its default encoding; a list of names picks columns with their
    defaults; a mapping gives explicit encodings, each checked against the column's Spark type.
    """
    fields = {field.name: field for field in schema.fields}
    names = [field.name for field in schema.fields]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if columns is None:
        if duplicates:
            raise ValueError(
                f"The DataFrame has duplicate column names {duplicates}; rename them or pick columns with `columns`."
            )
        columns = names
    if isinstance(columns, str) or not isinstance(columns, (Mapping, Sequence)):
        raise TypeError(
            f"`columns` must be a dict of column name -> MDS encoding or a list of column names, got {columns!r}."
        )
    requested = dict(columns) if isinstance(columns, Mapping) else {name: None for name in columns}
    if not requested:
        raise ValueError("`columns` is empty: name at least one column to write.")
    resolved = {}
    for name, encoding in requested.items():
        if name not in fields:
            raise ValueError(f"Column {name!r} is not in the DataFrame; its columns are {names}.")
        if name in duplicates:
            raise ValueError(f"Column name {name!r} appears more than once in the DataFrame; rename the copies.")
        data_type = fields[name].dataType
        if encoding is None:
            resolved[name] = default_encoding(data_type, name)
            continue
        if not isinstance(encoding, str) or not _is_allowed(encoding, data_type, name):
            raise ValueError(
                f"Column {name!r} of Spark type {data_type.simpleString()} cannot be stored as "
                f"{encoding!r}; valid choices: {', '.join(allowed_encodings(data_type, name))}."
            )
        resolved[name] = encoding
    return resolved


def quote_name(name: str) -> str:
    """A column name as a backquoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def select_expressions(schema: T.StructType, columns: Mapping[str, str]) -> list[str]:
    """SQL expressions that pick the columns to write, in a form Arrow can carry.

    Year-month intervals do not cross into Arrow, so they are turned into their number of months here.
    """
    fields = {field.name: field for field in schema.fields}
    expressions = []
    for name in columns:
        quoted = quote_name(name)
        if isinstance(fields[name].dataType, T.YearMonthIntervalType):
            expressions.append(
                f"CAST(extract(YEAR FROM {quoted}) * 12 + extract(MONTH FROM {quoted}) AS INT) AS {quoted}"
            )
        else:
            expressions.append(quoted)
    return expressions
