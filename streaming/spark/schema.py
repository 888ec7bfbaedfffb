"""Spark SQL types under the conversion's type rules: each Spark type's Arrow form, and what only Spark has.

The rules themselves (defaults, choices, refusals) are `streaming.convert.type_rules`'s; this module maps
every Spark type to the Arrow type its values cross into a task as (`arrow_type`), refuses up front the Spark
types that have no lossless form whatever the rules (geometry, geography, user-defined types other than Spark
ML's vectors, and year-month intervals or VARIANTs inside other types), and names Spark types in messages.
Spark ML vectors (``VectorUDT``) cross as their SQL struct, which the rules know (`type_rules.ML_VECTOR`).
Year-month intervals and VARIANTs do not cross into Arrow as they are: `select_expressions` turns them into
their number of months and their JSON text (``to_json``, Arrow's JSON type here) first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import types as T

from streaming.convert import type_rules
from streaming.convert.type_rules import BINARY_ENCODINGS, INTEGER_ENCODINGS, Wording

__all__ = [
    "BINARY_ENCODINGS",
    "INTEGER_ENCODINGS",
    "allowed_encodings",
    "arrow_type",
    "default_encoding",
    "resolve_columns",
    "select_expressions",
]

# Spark type → the Arrow type a task receives, for the types that are the same at any nesting.
_LEAVES: tuple[tuple[type[T.DataType], pa.DataType], ...] = (
    (T.ByteType, pa.int8()),
    (T.ShortType, pa.int16()),
    (T.IntegerType, pa.int32()),
    (T.LongType, pa.int64()),
    (T.FloatType, pa.float32()),
    (T.DoubleType, pa.float64()),
    (T.BooleanType, pa.bool_()),
    (T.StringType, pa.string()),
    (T.BinaryType, pa.binary()),
    (T.DateType, pa.date32()),
    (T.TimestampType, pa.timestamp("us", tz="UTC")),
    (T.TimestampNTZType, pa.timestamp("us")),
    (T.DayTimeIntervalType, pa.duration("us")),
    (T.YearMonthIntervalType, pa.int32()),  # as months, by `select_expressions`
    (T.NullType, pa.null()),
)


def is_variant(data_type: T.DataType) -> bool:
    """Whether ``data_type`` is Spark's VARIANT (Spark 4.0+, Databricks)."""
    return type(data_type).__name__ == "VariantType"


def is_ml_vector(data_type: T.DataType) -> bool:
    """Whether ``data_type`` is Spark ML's vector type (``pyspark.ml.linalg.VectorUDT`` or the older mllib one)."""
    return (
        isinstance(data_type, T.UserDefinedType)
        and type(data_type).__name__ == "VectorUDT"
        and type_rules.is_ml_vector(arrow_type(data_type.sqlType()))
    )


def array_depth(data_type: T.DataType) -> int:
    """How deep arrays of numbers are nested in ``data_type`` (1: an array of them), 0 for any other type."""
    try:
        found = type_rules.array_element(arrow_type(data_type))
    except ValueError:
        return 0
    return found[1] if found else 0


def _refusal_hint(data_type: T.DataType, nested: bool) -> str | None:
    """Why a Spark type cannot be stored, with what to do instead; None when it can."""
    name = type(data_type).__name__
    if is_variant(data_type) and (nested or not hasattr(pa, "json_")):
        where = "inside another type" if nested else "with pyarrow older than 19 (no JSON type)"
        return f"VARIANT is stored {where} only as JSON text: convert it first, e.g. F.to_json(col), then store it"
    if name in ("GeometryType", "GeographyType"):
        return "convert it first, e.g. F.st_asbinary(col) for WKB bytes (and keep the SRID in another column)"
    if isinstance(data_type, T.UserDefinedType) and not is_ml_vector(data_type):
        return (
            f"convert it first to its SQL type ({data_type.sqlType().simpleString()}) or to a plain column, "
            f"e.g. with pyspark.ml.functions.vector_to_array for ML vectors"
        )
    return None


def _check_storable(data_type: T.DataType, column: str, path: str = "") -> None:
    """Refuse the Spark types no rule can store, looking inside arrays, maps and structs."""
    where = f"column {column!r}" + (f" at {path}" if path else "")
    hint = _refusal_hint(data_type, bool(path))
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
        for field in data_type.fields:
            _check_storable(field.dataType, column, f"{path}.{field.name}")
    elif path and isinstance(data_type, T.YearMonthIntervalType):
        raise ValueError(
            f"Cannot convert {where}: year-month intervals are only supported as top-level "
            f"columns; convert it to months first, e.g. extract(YEAR FROM x) * 12 + "
            f"extract(MONTH FROM x)."
        )


def arrow_type(data_type: T.DataType) -> pa.DataType:
    """The Arrow type values of ``data_type`` reach a task as (after `select_expressions`)."""
    for spark_type, arrow in _LEAVES:
        if isinstance(data_type, spark_type):
            return arrow
    if isinstance(data_type, T.UserDefinedType) and type(data_type).__name__ == "VectorUDT":
        return type_rules.ML_VECTOR
    if is_variant(data_type) and hasattr(pa, "json_"):
        return pa.json_()  # as its JSON text, by `select_expressions`
    if isinstance(data_type, (T.CharType, T.VarcharType)):
        return pa.string()
    if isinstance(data_type, T.DecimalType):
        return pa.decimal128(data_type.precision, data_type.scale)
    if isinstance(data_type, T.ArrayType):
        return pa.list_(pa.field("element", arrow_type(data_type.elementType), data_type.containsNull))
    if isinstance(data_type, T.MapType):
        return pa.map_(arrow_type(data_type.keyType), arrow_type(data_type.valueType))
    if isinstance(data_type, T.StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in data_type.fields])
    name = type(data_type).__name__
    if name == "TimeType":  # Spark 4.1+
        return pa.time64("ns")
    if name == "CalendarIntervalType":
        return pa.month_day_nano_interval()
    raise ValueError(f"Spark type {data_type.simpleString()} has no Arrow form known to this package.")


def _wording(spark_types: Mapping[str, T.DataType]) -> Wording:
    """Messages in Spark's words: a column's type as Spark names it."""
    return Wording(
        source="the DataFrame",
        argument="`columns`",
        describe=lambda column, data_type: (
            f"Spark type {spark_types[column].simpleString()}" if column in spark_types else f"Arrow type {data_type}"
        ),
    )


def default_encoding(data_type: T.DataType, column: str) -> str:
    """The encoding a column of ``data_type`` gets when the user does not choose one."""
    _check_storable(data_type, column)
    return type_rules.default_encoding(arrow_type(data_type), column, _wording({column: data_type}))


def allowed_encodings(data_type: T.DataType, column: str) -> list[str]:
    """Every encoding a user may declare for a column of ``data_type`` (the default first)."""
    _check_storable(data_type, column)
    return type_rules.allowed_encodings(arrow_type(data_type), column, _wording({column: data_type}))


def resolve_columns(schema: T.StructType, columns: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """Check ``columns`` against ``schema`` and return ``{name: encoding}`` for every column to write.

    ``None`` means every column with its default encoding; a list of names picks columns with their
    defaults; a mapping gives explicit encodings, each checked against the column's Spark type.
    """
    if isinstance(columns, Mapping):
        chosen = [name for name in columns]
    elif isinstance(columns, Sequence) and not isinstance(columns, str):
        chosen = list(columns)
    else:
        chosen = [field.name for field in schema.fields]
    spark_types = {field.name: field.dataType for field in schema.fields}
    for name in chosen:
        if name in spark_types:
            _check_storable(spark_types[name], name)
    # Columns left out may have types without an Arrow form (they are never read): they get a stand-in.
    fields = [(name, arrow_type(data_type) if name in chosen else pa.null()) for name, data_type in _pairs(schema)]
    return type_rules.resolve_columns(fields, columns, _wording(spark_types))


def _pairs(schema: T.StructType) -> list[tuple[str, T.DataType]]:
    return [(field.name, field.dataType) for field in schema.fields]


def quote_name(name: str) -> str:
    """A column name as a backquoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def select_expressions(schema: T.StructType, columns: Mapping[str, str]) -> list[str]:
    """SQL expressions that pick the columns to write, in a form Arrow can carry.

    Year-month intervals do not cross into Arrow, so they are turned into their number of months here; VARIANTs
    into their JSON text.
    """
    fields = {field.name: field for field in schema.fields}
    expressions = []
    for name in columns:
        quoted = quote_name(name)
        if isinstance(fields[name].dataType, T.YearMonthIntervalType):
            expressions.append(
                f"CAST(extract(YEAR FROM {quoted}) * 12 + extract(MONTH FROM {quoted}) AS INT) AS {quoted}"
            )
        elif is_variant(fields[name].dataType):
            expressions.append(f"to_json({quoted}) AS {quoted}")
        else:
            expressions.append(quoted)
    return expressions
