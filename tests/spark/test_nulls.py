"""NULLs with default columns: a Delta table and a DataFrame with NULLs in every column type convert losslessly.

One table holds every type with NULLs in some rows (plus a nullable column without NULLs, whose encoding must
not change). It is written with ``deltalake`` (no Delta jars here), converted from its path on the classic
session (NULL counts from the Delta statistics, the rest by one aggregate job) and as a DataFrame on Spark
Connect (aggregate only); our readers give every NULL back as None and every value as the NULL-free encoding
does, and streaming-community 0.14.2 reads the same dataset as plain columns.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import textwrap
import warnings
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from streaming.convert.null_plan import _delta_null_counts
from streaming.convert.source import Source
from streaming.dataset.local import LocalDataset
from streaming.spark import dataframe_to_mds

UTC = datetime.timezone.utc
ROWS = 4
# Column → (Arrow type, values by row). Row 0 has values everywhere, rows 1 and 3 NULLs in most columns.
COLUMNS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "id": (pa.int64(), [0, 1, 2, 3]),
    "clean": (pa.int32(), [10, 11, 12, 13]),
    "i8": (pa.int8(), [-5, None, 7, None]),
    "i16": (pa.int16(), [-300, None, 2, 3]),
    "i32": (pa.int32(), [None, 1, -2, None]),
    "i64": (pa.int64(), [1 << 40, None, 0, -1]),
    "f32": (pa.float32(), [1.5, None, float("nan"), None]),
    "f64": (pa.float64(), [-0.0, None, 2.25, None]),
    "flag": (pa.bool_(), [True, None, False, None]),
    "text": (pa.string(), ["héllo", None, "", None]),
    "blob": (pa.binary(), [b"\x00\x01", None, b"", None]),
    "price": (pa.decimal128(10, 2), [Decimal("123.45"), None, Decimal("-0.01"), None]),
    "big": (pa.decimal128(38, 10), [Decimal("1234567890123456789012345678.0123456789"), None, Decimal(0), None]),
    "day": (pa.date32(), [datetime.date(2024, 2, 29), None, datetime.date(1969, 12, 31), None]),
    "at": (pa.timestamp("us", tz="UTC"), [datetime.datetime(2024, 1, 1, 12, tzinfo=UTC), None, None, None]),
    "wall": (pa.timestamp("us"), [datetime.datetime(2000, 1, 1, 0, 0, 1), None, datetime.datetime(1970, 1, 1), None]),
    "ints": (pa.list_(pa.int32()), [[1, 2, 3], None, [], None]),
    "floats": (pa.list_(pa.float64()), [[0.5], None, [1.0, None], None]),
    "point": (pa.struct([("x", pa.int64()), ("label", pa.string())]), [{"x": 1, "label": "a"}, None, None, None]),
    "tags": (pa.map_(pa.string(), pa.int64()), [[("a", 1)], None, [("b", None)], None]),
}


def _table() -> pa.Table:
    return pa.table({name: pa.array(values, data_type) for name, (data_type, values) in COLUMNS.items()})


def _expected(name: str, value: Any) -> Any:
    """What a non-NULL value reads back as with the column's default encoding (streaming/spark/schema.py)."""
    if name == "flag":
        return int(value)
    if name == "day":
        return (value - datetime.date(1970, 1, 1)).days
    if name == "at":
        return int((value - datetime.datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
    if name == "wall":
        return int((value - datetime.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
    if name == "floats":  # it has a NULL element, so the whole column is json
        return value
    if name == "tags":
        return dict(value)
    return value


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(actual, np.ndarray):
        return actual.tolist() == list(expected)
    if isinstance(expected, float) and np.isnan(expected):
        return bool(np.isnan(actual))
    if isinstance(expected, float):  # -0.0 keeps its sign
        return bool(actual == expected and np.signbit(actual) == np.signbit(expected))
    if isinstance(expected, (bytes, str, Decimal, dict, list)):
        return type(actual) is type(expected) and actual == expected
    return bool(actual == expected)


def _assert_reads_back(out: str) -> None:
    samples = sorted(LocalDataset(out), key=lambda sample: int(sample["id"]))
    assert len(samples) == ROWS
    for row, sample in enumerate(samples):
        assert set(sample) == set(COLUMNS), f"mask columns must be folded away, got {sorted(sample)}"
        for name, (_, values) in COLUMNS.items():
            value = values[row]
            if value is None:
                assert sample[name] is None, f"row {row}, column {name}: {sample[name]!r} should be None"
            else:
                assert _same(sample[name], _expected(name, value)), f"row {row}, column {name}: {sample[name]!r}"
    assert isinstance(samples[0]["price"], Decimal) and isinstance(samples[0]["blob"], bytes)


def _check_result(result: Any) -> None:
    masked = {name for name, (_, values) in COLUMNS.items() if None in values} - {"floats", "point", "tags"}
    assert set(result.nulls) == masked
    assert result.nulls["i32"] == "i32__is_null" and result.columns["i32__is_null"] == "uint8"
    assert result.nulls_json == ["floats"] and result.columns["floats"] == "json"
    # Unchanged encodings: the NULL-free column, the masked columns' values, json columns.
    assert result.columns["clean"] == "int32" and "clean__is_null" not in result.columns
    assert result.columns["ints"] == "ndarray:int32" and result.columns["price"] == "str_decimal"
    assert result.columns["point"] == "json" and "point__is_null" not in result.columns


def _reference_reads(out: str) -> list[dict[str, Any]]:
    """The samples streaming-community 0.14.2 reads, as JSON-able values, by ``id``."""
    python = os.environ.get("MDS_REFERENCE_PYTHON")
    if not python or not os.access(python, os.X_OK):
        pytest.fail("MDS_REFERENCE_PYTHON must name streaming-community 0.14.2's python (make test sets it).")
    script = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        from streaming import LocalDataset
        def plain(value):
            if isinstance(value, np.ndarray):
                return value.tolist()
            if isinstance(value, np.generic):
                return value.item()
            if isinstance(value, bytes):
                return value.hex()
            return value if isinstance(value, (int, float, str, list, dict, type(None))) else str(value)
        dataset = LocalDataset(sys.argv[1])
        samples = [{k: plain(v) for k, v in dataset[i].items()} for i in range(len(dataset))]
        print(json.dumps(sorted(samples, key=lambda s: s["id"])))
        """
    )
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [python, "-I", "-c", script, out], capture_output=True, text=True, env=environment, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.reference
def test_delta_table_with_nulls_in_every_type_converts_with_defaults(spark, tmp_path):
    from deltalake import write_deltalake

    table = str(tmp_path / "table")
    write_deltalake(table, _table().slice(0, 2))
    write_deltalake(table, _table().slice(2), mode="append")
    out = str(tmp_path / "out")
    with pytest.warns(UserWarning, match=r"'i32' \(2 NULLs, mask 'i32__is_null'\)") as caught:
        result = dataframe_to_mds(table, out, spark=spark, progress=False)
    # pyspark 3.5 warns too (distutils): the package's warning is the one naming the masks.
    warning = next(str(w.message) for w in caught if "i32__is_null" in str(w.message))
    assert "'floats'" in warning and "'clean'" not in warning
    _check_result(result)
    assert result.table_version == 1
    assert result.nulls_counted_by == "delta statistics+aggregate"  # arrays have no nullCount in the statistics
    _assert_reads_back(out)
    with open(os.path.join(out, "mds_conversion.json"), encoding="utf-8") as file:
        assert json.load(file)["latest"]["nulls"]["masks"]["text"] == "text__is_null"

    reference = _reference_reads(out)
    assert [sample["id"] for sample in reference] == [0, 1, 2, 3]
    assert [sample["i32"] for sample in reference] == [0, 1, -2, 0]
    assert [sample["i32__is_null"] for sample in reference] == [1, 0, 0, 1]
    assert [sample["text"] for sample in reference] == ["héllo", "", "", ""]
    assert [sample["price"] for sample in reference] == ["123.45", "0.00", "-0.01", "0.00"]
    assert [sample["ints"] for sample in reference] == [[1, 2, 3], [], [], []]
    assert [sample["point"] for sample in reference] == [{"x": 1, "label": "a"}, None, None, None]
    assert "clean__is_null" not in reference[0]


def test_dataframe_with_nulls_on_spark_connect(connect, tmp_path):
    frame = connect.createDataFrame(_table())
    out = str(tmp_path / "out")
    with pytest.warns(UserWarning, match="hold NULLs"):
        result = dataframe_to_mds(frame, out, progress=False)
    _check_result(result)
    assert result.nulls_counted_by == "aggregate"
    _assert_reads_back(out)

    # nulls="error" keeps the strict behaviour, and so does an explicit encoding for the column.
    with pytest.raises(Exception, match="holds a NULL"):
        dataframe_to_mds(frame.select("id", "i32"), str(tmp_path / "strict"), nulls="error", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(Exception, match="'i32' \\(encoding 'int64'\\) holds a NULL"):
            dataframe_to_mds(frame.select("id", "i32"), str(tmp_path / "explicit"), columns={"i32": "int64"})


def test_delta_statistics_give_the_counts_of_the_columns_they_cover(tmp_path):
    from deltalake import write_deltalake

    table = str(tmp_path / "table")
    write_deltalake(table, _table())
    counts = _delta_null_counts(Source("delta", table, 0, "deltalake"), ["clean", "i32", "text", "ints", "point"])
    # Structs are counted per field and arrays not at all: those are left to the aggregate job.
    assert counts == {"clean": 0, "i32": 2, "text": 2}
    assert _delta_null_counts(Source("dataframe"), ["i32"]) == {}


@pytest.mark.reference
def test_incremental_runs_of_a_delta_table_with_nulls_in_every_type(spark, tmp_path):
    """Two table versions with NULLs through incremental_to_mds: masks made by the first run, kept by the next."""
    from deltalake import write_deltalake

    from streaming.spark import incremental_to_mds

    table, out = str(tmp_path / "table"), str(tmp_path / "out")
    write_deltalake(table, _table().slice(0, 3))  # version 0: a NULL (or NULL element) in every nullable column
    with pytest.warns(UserWarning, match=r"'i32' \(1 NULL, mask 'i32__is_null'\)"):
        first = incremental_to_mds(table, out, spark=spark, progress=False)
    assert (first.method, first.version, first.samples) == ("snapshot", 0, 3)
    write_deltalake(table, _table().slice(3), mode="append")  # version 1: row 3, NULLs where i16/i64 have none
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing new to warn about: the dataset's masks are reused
        second = incremental_to_mds(table, out, spark=spark, progress=False)
    assert (second.method, second.previous_version, second.version, second.samples) == ("snapshot_diff", 0, 1, 1)
    _assert_reads_back(out)
    reference = _reference_reads(out)
    assert [sample["i16__is_null"] for sample in reference] == [0, 1, 0, 0]
    assert [sample["blob"] for sample in reference] == ["0001", "", "", ""]
    assert [sample["floats"] for sample in reference] == [[0.5], None, [1.0, None], None]

    # A NULL where the dataset stores a column without a mask is refused, naming it; nothing is appended.
    late = _table().slice(0, 1).set_column(1, "clean", pa.array([None], pa.int32()))
    write_deltalake(table, late, mode="append")
    index = (tmp_path / "out" / "index.json").read_bytes()
    with pytest.raises(ValueError, match=r"column\(s\) 'clean' \(1 NULLs\), which the dataset's shards store"):
        incremental_to_mds(table, out, spark=spark, progress=False)
    assert (tmp_path / "out" / "index.json").read_bytes() == index
    with pytest.raises(Exception, match="holds a NULL, and MDS has no NULL"):
        incremental_to_mds(table, str(tmp_path / "strict"), spark=spark, progress=False, nulls="error")
