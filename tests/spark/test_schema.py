"""Spark type → MDS encoding rules: defaults for every type, user overrides, refusals with choices."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from streaming.spark.schema import allowed_encodings, default_encoding, resolve_columns, select_expressions


def _newer(type_name: str, build, expected: str) -> list[tuple[T.DataType, str]]:
    """A case for a type only newer pyspark has (TimeType 4.1, VariantType 4.0, ...): none on pyspark 3.5."""
    kind = getattr(T, type_name, None)
    return [] if kind is None else [(build(kind), expected)]


@pytest.mark.parametrize(
    "data_type, encoding",
    [
        (T.ByteType(), "int8"),
        (T.ShortType(), "int16"),
        (T.IntegerType(), "int32"),
        (T.LongType(), "int64"),
        (T.FloatType(), "float32"),
        (T.DoubleType(), "float64"),
        (T.BooleanType(), "uint8"),
        (T.DecimalType(38, 18), "str_decimal"),
        (T.DecimalType(1, 0), "str_decimal"),
        (T.StringType(), "str"),
        (T.VarcharType(5), "str"),
        (T.CharType(3), "str"),
        (T.BinaryType(), "bytes"),
        (T.DateType(), "int32"),
        (T.TimestampType(), "int64"),
        (T.TimestampNTZType(), "int64"),
        *_newer("TimeType", lambda kind: kind(6), "int64"),
        (T.DayTimeIntervalType(), "int64"),
        (T.YearMonthIntervalType(), "int32"),
        *_newer("CalendarIntervalType", lambda kind: kind(), "json"),
        (T.NullType(), "json"),
        (T.ArrayType(T.ByteType()), "ndarray:int8"),
        (T.ArrayType(T.IntegerType(), False), "ndarray:int32"),
        (T.ArrayType(T.FloatType()), "ndarray:float32"),
        (T.ArrayType(T.BooleanType()), "ndarray:uint8"),
        (T.ArrayType(T.DateType()), "ndarray:int32"),
        (T.ArrayType(T.TimestampType()), "ndarray:int64"),
        (T.ArrayType(T.StringType()), "json"),
        (T.ArrayType(T.ArrayType(T.IntegerType())), "ndarray:int32"),
        (T.ArrayType(T.ArrayType(T.ArrayType(T.FloatType(), False))), "ndarray:float32"),
        (T.ArrayType(T.ArrayType(T.StringType())), "json"),
        *_newer("VariantType", lambda kind: kind(), "json"),
        (T.ArrayType(T.DecimalType(5, 2)), "json"),
        (T.MapType(T.StringType(), T.LongType()), "json"),
        (T.MapType(T.IntegerType(), T.BinaryType()), "json"),
        (T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.BinaryType())]), "json"),
    ],
)
def test_default_encoding_for_every_type(data_type, encoding):
    assert default_encoding(data_type, "c") == encoding


@pytest.mark.parametrize(
    "data_type, hint",
    [
        *_newer("GeometryType", lambda kind: kind(0), "st_asbinary"),
        *_newer("GeographyType", lambda kind: kind(4326), "st_asbinary"),
        *_newer("VariantType", lambda kind: T.ArrayType(kind()), "to_json"),
        *_newer("GeometryType", lambda kind: T.StructType([T.StructField("g", kind(0))]), "st_asbinary"),
        (T.ArrayType(T.YearMonthIntervalType()), "months"),
    ],
)
def test_types_without_a_lossless_form_are_refused_naming_the_column(data_type, hint):
    schema = T.StructType([T.StructField("bad col", data_type)])
    with pytest.raises(ValueError, match=r"column 'bad col'") as err:
        resolve_columns(schema, None)
    assert hint in str(err.value)


def test_ml_vectors_are_ndarrays_other_user_defined_types_are_refused():
    from pyspark.ml.linalg import MatrixUDT, VectorUDT
    from pyspark.mllib.linalg import VectorUDT as OldVectorUDT

    schema = T.StructType([T.StructField("v", VectorUDT()), T.StructField("w", OldVectorUDT())])
    assert resolve_columns(schema, None) == {"v": "ndarray:float64", "w": "ndarray:float64"}
    assert allowed_encodings(VectorUDT(), "v")[:3] == ["ndarray:float64", "ndarray:float32", "ndarray:float16"]
    chosen = {"v": "ndarray:float32:3", "w": "sparse:float32"}
    assert resolve_columns(schema, chosen) == chosen
    with pytest.raises(ValueError, match=r"Column 'v' of Spark type vector cannot be stored as 'ndarray:int32'"):
        resolve_columns(schema, {"v": "ndarray:int32"})
    with pytest.raises(ValueError, match=r"column 'm'.*vector_to_array"):
        resolve_columns(T.StructType([T.StructField("m", MatrixUDT())]), None)


@pytest.mark.parametrize("variant", [kind() for kind in [getattr(T, "VariantType", None)] if kind] or [None])
def test_variant_is_json_text_at_the_top_level_only(variant):
    """VARIANT (pyspark 4): its JSON text, from to_json; on pyspark 3.5 (no such type) the string stays a string."""
    if variant is None:
        assert resolve_columns(T.StructType([T.StructField("v", T.StringType())]), None) == {"v": "str"}
        return
    schema = T.StructType([T.StructField("v", variant), T.StructField("s", T.ArrayType(variant))])
    assert resolve_columns(schema, ["v"]) == {"v": "json"}
    assert allowed_encodings(variant, "v") == ["json", "str"]
    assert select_expressions(schema, {"v": "json"}) == ["to_json(`v`) AS `v`"]
    with pytest.raises(ValueError, match=r"column 's' at \[\]: .*to_json"):
        resolve_columns(schema, ["s"])


def test_struct_with_duplicate_field_names_is_refused():
    struct = T.StructType([T.StructField("a", T.LongType()), T.StructField("a", T.StringType())])
    with pytest.raises(ValueError, match=r"duplicate field names \['a'\]"):
        resolve_columns(T.StructType([T.StructField("s", struct)]), None)


SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("flag", T.BooleanType()),
        T.StructField("x", T.FloatType()),
        T.StructField("blob", T.BinaryType()),
        T.StructField("vec", T.ArrayType(T.DoubleType())),
        T.StructField("d", T.DateType()),
        T.StructField("ym", T.YearMonthIntervalType()),
        T.StructField("amount", T.DecimalType(10, 2)),
        T.StructField("name", T.StringType()),
    ]
)


def test_user_columns_override_within_the_allowed_choices():
    chosen = {
        "id": "uint32",
        "flag": "int",
        "x": "float64",
        "blob": "jpeg",
        "vec": "ndarray:float64:2,2",
        "d": "json",
        "amount": "json",
        "name": "str",
    }
    assert resolve_columns(SCHEMA, chosen) == chosen
    assert resolve_columns(SCHEMA, ["vec", "id"]) == {"vec": "ndarray:float64", "id": "int64"}
    assert resolve_columns(SCHEMA, {"vec": "ndarray", "id": "str_int"}) == {"vec": "ndarray", "id": "str_int"}


@pytest.mark.parametrize(
    "columns, message",
    [
        ({"nope": "str"}, r"Column 'nope' is not in the DataFrame; its columns are \['id', 'flag'"),
        (
            {"x": "float16"},
            r"Column 'x' of Spark type float cannot be stored as 'float16'; valid choices: float32, "
            r"float64, json",
        ),
        ({"vec": "ndarray:float32"}, r"valid choices: ndarray:float64, ndarray, ndarray:float64:<shape>, json"),
        ({"vec": "ndarray:float64:0"}, "cannot be stored as 'ndarray:float64:0'"),
        ({"name": "bytes"}, r"valid choices: str, json"),
        ({"blob": "str"}, r"valid choices: bytes, pil, png, jpeg, pkl, json"),
        ({"amount": "float64"}, r"valid choices: str_decimal, json"),
        (
            {"id": "float64"},
            r"valid choices: int64, int8, int16, int32, uint8, uint16, uint32, uint64, int, str_int, "
            r"json\.",
        ),
        ({}, "`columns` is empty"),
    ],
)
def test_user_columns_are_validated_against_the_schema(columns, message):
    with pytest.raises(ValueError, match=message):
        resolve_columns(SCHEMA, columns)


def test_columns_must_be_a_mapping_or_names():
    with pytest.raises(TypeError, match="`columns` must be a dict"):
        resolve_columns(SCHEMA, "id")


def test_duplicate_dataframe_columns_are_refused():
    schema = T.StructType([T.StructField("a", T.LongType()), T.StructField("a", T.LongType())])
    with pytest.raises(ValueError, match=r"duplicate column names \['a'\]"):
        resolve_columns(schema, None)


def test_allowed_encodings_lists_the_default_first():
    assert allowed_encodings(T.ShortType(), "c")[:2] == ["int16", "int8"]
    if hasattr(T, "CalendarIntervalType"):  # in pyspark from 4.0
        assert allowed_encodings(T.CalendarIntervalType(), "c") == ["json"]


def test_select_expressions_quote_names_and_turn_year_month_intervals_into_months():
    schema = T.StructType([T.StructField("we`ird", T.LongType()), T.StructField("ym", T.YearMonthIntervalType())])
    expressions = select_expressions(schema, {"we`ird": "int64", "ym": "int32"})
    assert expressions[0] == "`we``ird`"
    assert expressions[1] == "CAST(extract(YEAR FROM `ym`) * 12 + extract(MONTH FROM `ym`) AS INT) AS `ym`"
