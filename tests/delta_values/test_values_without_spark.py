"""The value readers of `streaming.delta.scan` without Spark: timestamps of every unit, widening, VARIANT bytes.

What Delta Lake on Spark writes is compared with Spark's reader in tests/delta_lake/test_values.py; here are the
cases Spark cannot write or read (INT64 nanoseconds, damaged variant bytes), the corners of the JSON text a
VARIANT becomes, and a damaged table converted by the command line, which must end in one sentence and an exit
code, never a native abort.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming.delta.errors import UnreadableValueError
from streaming.delta.scan import snapshot_rows
from streaming.delta.snapshot import Snapshot
from streaming.delta.variant import MAX_DEPTH, json_texts
from streaming.delta.widening import widened
from tests.delta_values.tables import array, metadata, obj, primitive, rewritten_table, short, string, variant_table

MDS_STREAMING = str(Path(sys.executable).with_name("mds-streaming"))
#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z in microseconds: the ends of Spark's range.
FIRST, LAST = -62135596800000000, 253402300799999999


def test_int96_timestamps_are_read_from_year_1_to_9999(tmp_path):
    """Arrow reads INT96 as nanoseconds by default, which end in 2262: year 9999 failed with ArrowInvalid."""
    rows = pa.table({"t": pa.array([FIRST, LAST, 0, None], pa.timestamp("us", "UTC"))})
    path = rewritten_table(tmp_path / "int96", rows, use_deprecated_int96_timestamps=True)
    (data,) = Path(path).glob("*.parquet")
    assert pq.ParquetFile(data).schema.column(0).physical_type == "INT96"
    read = snapshot_rows(Snapshot.open(path))
    assert read.column("t").cast(pa.int64()).to_pylist() == [FIRST, LAST, 0, None]


@pytest.mark.parametrize("unit", ["s", "ms", "ns"])
def test_int64_timestamps_of_every_unit_are_read_as_microseconds(tmp_path, unit):
    """Seconds and milliseconds widen exactly; nanoseconds (which Spark 4.0's reader refuses outright,
    PARQUET_TYPE_ILLEGAL) are floored to the microsecond, as Spark floors an INT96's nanoseconds."""
    per_unit = {"s": 1_000_000, "ms": 1_000, "ns": 1}[unit]
    if unit == "ns":
        values, expected = [-1_500, 1_500, 2**63 - 1, None], [-2, 1, (2**63 - 1) // 1000, None]
    else:
        values = [FIRST // per_unit, LAST // per_unit, -1, None]
        expected = [FIRST, LAST // per_unit * per_unit, -per_unit, None]
    rows = pa.table({"t": pa.array(values, pa.timestamp(unit))})
    path = rewritten_table(tmp_path / unit, rows, coerce_timestamps=None, allow_truncated_timestamps=False)
    read = snapshot_rows(Snapshot.open(path))
    assert read.schema.field("t").type == pa.timestamp("us")
    assert read.column("t").cast(pa.int64()).to_pylist() == expected


@pytest.mark.parametrize(
    ("written_by", "refused"),
    [
        ({"org.apache.spark.version": "2.4.8"}, True),
        ({"org.apache.spark.version": "3.5.0"}, False),
        ({"org.apache.spark.version": "3.5.0", "org.apache.spark.legacyDateTime": ""}, True),
        ({}, False),
    ],
    ids=["spark-2", "spark-3-corrected", "spark-3-legacy", "another-writer"],
)
def test_dates_before_1900_of_a_legacy_calendar_file_are_refused_wherever_they_nest(tmp_path, written_by, refused):
    """Spark shifts such values by its session's calendar rules; this reader names the column and file instead."""
    import datetime

    days = pa.array([[datetime.date(1000, 1, 1)], [datetime.date(1950, 1, 1)]], pa.list_(pa.date32()))
    rows = pa.table({"d": days}).replace_schema_metadata(written_by)
    path = rewritten_table(tmp_path / "legacy", rows)
    if not refused:
        assert snapshot_rows(Snapshot.open(path)).column("d").to_pylist() == days.to_pylist()
        return
    with pytest.raises(UnreadableValueError) as error:
        snapshot_rows(Snapshot.open(path))
    assert str(error.value).startswith(f"column 'd' of {path}/part-")
    assert "holds dates or timestamps before 1900 written in Spark's legacy hybrid Julian calendar" in str(error.value)


def test_a_type_no_widening_explains_is_named_with_its_file_and_column():
    with pytest.raises(UnreadableValueError) as refused:
        widened(pa.array(["x"]), pa.int32(), "column 'c' of /t/part-0.parquet")
    assert str(refused.value).startswith(
        "column 'c' of /t/part-0.parquet is stored as string, which cannot be read as the table's type int32"
    )


# -- VARIANT bytes (Parquet's VariantEncoding.md) -----------------------------------------------------------------
def _texts(values: list[bytes], keys: bytes = metadata()) -> list[str | None]:
    column = pa.StructArray.from_arrays(
        [pa.array([keys] * len(values), pa.binary()), pa.array(values, pa.binary())], ["metadata", "value"]
    )
    return json_texts(column, "column 'v' of t/part-0.parquet").storage.to_pylist()


def _double(value: float) -> bytes:
    return primitive(7, struct.pack("<d", value))


def _float(value: float) -> bytes:
    return primitive(14, struct.pack("<f", value))


def test_every_primitive_prints_as_spark_prints_it():
    day, micros = struct.Struct("<i"), struct.Struct("<q")
    cases = {
        primitive(0): "null",
        primitive(1): "true",
        primitive(2): "false",
        primitive(3, b"\x80"): "-128",
        primitive(6, micros.pack(-(2**63))): str(-(2**63)),
        _double(1e10): "1.0E10",
        _double(0.1): "0.1",
        _double(1e-5): "1.0E-5",
        _double(0.001): "0.001",
        _double(-0.0025): "-0.0025",
        _double(1e7): "1.0E7",
        _double(9999999.0): "9999999.0",
        _double(123456789.0): "1.23456789E8",
        _double(-0.0): "-0.0",
        _double(float("nan")): '"NaN"',
        _double(float("-inf")): '"-Infinity"',
        _float(1.1): "1.1",
        _float(3e38): "3.0E38",
        primitive(8, bytes([2]) + (150).to_bytes(4, "little", signed=True)): "1.5",
        primitive(8, bytes([3]) + (-5).to_bytes(4, "little", signed=True)): "-0.005",
        primitive(8, bytes([3]) + (0).to_bytes(4, "little", signed=True)): "0",
        primitive(9, bytes([0]) + (100).to_bytes(8, "little", signed=True)): "100",
        primitive(10, bytes([2]) + (-(10**37)).to_bytes(16, "little", signed=True)): "-1" + "0" * 35,
        primitive(11, day.pack(-719162)): '"0001-01-01"',
        primitive(11, day.pack(2932896)): '"9999-12-31"',
        primitive(11, day.pack(2932897)): '"+10000-01-01"',
        primitive(12, micros.pack(LAST)): '"9999-12-31 23:59:59.999999+00:00"',
        primitive(12, micros.pack(FIRST)): '"0001-01-01 00:00:00+00:00"',
        primitive(13, micros.pack(120_000)): '"1970-01-01 00:00:00.12"',
        primitive(13, micros.pack(-1)): '"1969-12-31 23:59:59.999999"',
        primitive(15, (3).to_bytes(4, "little") + b"\x00\xff\x10"): '"AP8Q"',
        string('q"\\\x01\t\x7fé'): '"q\\"\\\\\\u0001\\t\x7fé"',
        primitive(20, bytes(range(16))): '"00010203-0405-0607-0809-0a0b0c0d0e0f"',
        short("𝄞"): '"𝄞"',
    }
    assert _texts(list(cases)) == list(cases.values())


def test_objects_and_arrays_keep_the_encoding_order():
    keys = metadata("a", "b", "")
    value = obj([(2, array()), (0, primitive(5, (1).to_bytes(4, "little"))), (1, array(short("x")))])
    assert _texts([value], keys) == ['{"":[],"a":1,"b":["x"]}']


def test_a_shredded_value_is_rebuilt_with_its_fields_sorted():
    """VariantShredding.md: an object's typed fields, its other fields in ``value``, a field missing in both."""
    keys = metadata("z", "a")
    element = pa.struct([("value", pa.binary()), ("typed_value", pa.float64())])
    typed = pa.struct(
        [
            ("b", pa.struct([("value", pa.binary()), ("typed_value", pa.int32())])),
            ("c", pa.struct([("value", pa.binary()), ("typed_value", pa.list_(element))])),
            ("m", pa.struct([("value", pa.binary()), ("typed_value", pa.string())])),
        ]
    )
    rows = [
        # partly shredded: z in value, b and c typed, m missing
        (obj([(0, primitive(1))]), {"b": {"typed_value": 5}, "c": {"typed_value": [{"typed_value": 1.5}]}}),
        # not an object: in value only
        (short("plain"), None),
        # a field that did not fit its type stays in its own value
        (None, {"b": {"value": short("no")}, "c": {"typed_value": [{"value": primitive(0)}]}, "m": {}}),
    ]
    column = pa.StructArray.from_arrays(
        [
            pa.array([keys] * len(rows), pa.binary()),
            pa.array([value for value, _ in rows], pa.binary()),
            pa.array([shredded for _, shredded in rows], typed),
        ],
        ["metadata", "value", "typed_value"],
    )
    assert json_texts(column, "v").storage.to_pylist() == [
        '{"b":5,"c":[1.5],"z":true}',
        '"plain"',
        '{"b":"no","c":[null]}',
    ]


@pytest.mark.parametrize(
    ("keys", "value", "why"),
    [
        (bytes([0x02, 0]), primitive(0), "its metadata is not of variant encoding version 1"),
        (bytes([0x01, 200, 0]), primitive(0), "its metadata declares 200 keys but holds 3 bytes"),
        (metadata("a"), obj([(5, primitive(0))]), "an object names key 5 of a dictionary of 1"),
        (metadata(), _double(1.0)[:5], "a value ends early"),
        (metadata(), bytes([3, 250, 0]), "a container declares 250 elements beyond its value's 3 bytes"),
        (metadata(), primitive(17, bytes(8)), "it holds a time of day, a variant type Spark 4.0's reader"),
        (metadata(), primitive(30), "it holds an unknown primitive type 30"),
        (metadata(), primitive(16, (1).to_bytes(4, "little") + b"\xff"), "a string is not UTF-8"),
    ],
    ids=["version", "key-count", "key-id", "truncated", "container", "time", "unknown", "utf8"],
)
def test_damaged_variant_bytes_are_named_never_guessed(keys, value, why):
    with pytest.raises(UnreadableValueError) as refused:
        _texts([value], keys)
    assert str(refused.value).startswith(
        f"column 'v' of t/part-0.parquet holds a variant that cannot be read: {why}"
    ), str(refused.value)


def test_a_variant_nested_deeper_than_the_bound_is_refused_not_a_recursion_error():
    value = primitive(0)
    for _ in range(MAX_DEPTH + 1):
        value = array(value)
    with pytest.raises(UnreadableValueError, match=f"nests arrays and objects more than {MAX_DEPTH} deep"):
        _texts([value])


def test_a_damaged_variant_in_a_table_ends_the_command_in_one_sentence(tmp_path):
    """The command line converts a table whose VARIANT bytes are damaged: an exit code and a sentence naming the
    column and file, no traceback and no native abort (SIGABRT)."""
    folder = tmp_path / "table"
    variant_table(folder, [bytes([0x02, 0])], [primitive(0)])
    assert "variant" in Snapshot.open(str(folder)).delta_schema
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK")}
    done = subprocess.run(
        [MDS_STREAMING, "convert", str(folder), str(tmp_path / "out"), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, (done.returncode, done.stderr)
    said = " ".join(done.stderr.split())
    assert "holds a variant that cannot be read: its metadata is not of variant encoding version 1" in said, said
    assert "Traceback" not in done.stderr
