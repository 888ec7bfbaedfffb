"""`streaming.spark.dataframe_to_mds` end to end, on a classic local session and on Spark Connect."""

from __future__ import annotations

import json
import os
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyspark.sql.types
import pytest

from streaming.spark import dataframe_to_mds
from streaming.storage.dataset_root import DatasetRoot
from tests.helpers import assert_same_value
from tests.spark.helpers import MDS_SHARD_KEYS, assert_no_orphans, commit_files, files_under, load_index, read_samples

# (column, SQL for row 0, SQL for row 1, value read back for row 0, value read back for row 1)
TYPES = [
    ("i8", "CAST(-128 AS TINYINT)", "CAST(127 AS TINYINT)", np.int8(-128), np.int8(127)),
    ("i16", "CAST(-32768 AS SMALLINT)", "CAST(7 AS SMALLINT)", np.int16(-32768), np.int16(7)),
    ("i32", "-2147483648", "2147483647", np.int32(-2147483648), np.int32(2147483647)),
    ("i64", "-9223372036854775808L", "9223372036854775807L", np.int64(-(2**63)), np.int64(2**63 - 1)),
    ("f32", "CAST('NaN' AS FLOAT)", "CAST('-0.0' AS FLOAT)", np.float32("nan"), np.float32(-0.0)),
    ("f64", "CAST('-Infinity' AS DOUBLE)", "0.1D", np.float64("-inf"), np.float64(0.1)),
    ("flag", "true", "false", np.uint8(1), np.uint8(0)),
    (
        "dec38",
        "CAST('-12345678901234567890.123456789012345678' AS DECIMAL(38,18))",
        "CAST('0.000000000000000001' AS DECIMAL(38,18))",
        Decimal("-12345678901234567890.123456789012345678"),
        Decimal("1E-18"),
    ),
    ("dec5", "CAST('0.10' AS DECIMAL(5,2))", "CAST('-999.99' AS DECIMAL(5,2))", Decimal("0.10"), Decimal("-999.99")),
    ("text", "'héllo ✓'", "''", "héllo ✓", ""),
    ("blob", "X'00FF'", "X''", b"\x00\xff", b""),
    ("day", "DATE'1969-12-31'", "DATE'2024-02-29'", np.int32(-1), np.int32(19782)),
    (
        "ts",
        "TIMESTAMP'1970-01-01 00:00:00.000001'",
        "TIMESTAMP'1900-01-01 00:00:00'",
        np.int64(1),
        np.int64(-2208988800000000),
    ),
    (
        "ntz",
        "TIMESTAMP_NTZ'2020-01-02 03:04:05.123456'",
        "TIMESTAMP_NTZ'1970-01-01 00:00:00'",
        np.int64(1577934245123456),
        np.int64(0),
    ),
    ("tod", "TIME'12:34:56.789'", "TIME'00:00:00'", np.int64(45296789000000), np.int64(0)),
    (
        "dti",
        "INTERVAL '1 02:03:04.5' DAY TO SECOND",
        "INTERVAL '-0 00:00:00.000001' DAY TO SECOND",
        np.int64(93784500000),
        np.int64(-1),
    ),
    ("ymi", "INTERVAL '-1-2' YEAR TO MONTH", "INTERVAL '0-5' YEAR TO MONTH", np.int32(-14), np.int32(5)),
    ("ints", "array(1, 2, 3)", "CAST(array() AS ARRAY<INT>)", np.array([1, 2, 3], np.int32), np.array([], np.int32)),
    (
        "floats",
        "array(CAST(1.5 AS FLOAT), CAST('NaN' AS FLOAT))",
        "array(CAST(-1 AS FLOAT))",
        np.array([1.5, np.nan], np.float32),
        np.array([-1], np.float32),
    ),
    ("flags", "array(true, false)", "array(false)", np.array([1, 0], np.uint8), np.array([0], np.uint8)),
    (
        "days",
        "array(DATE'1970-01-02')",
        "array(DATE'1969-12-30', DATE'1970-01-01')",
        np.array([1], np.int32),
        np.array([-2, 0], np.int32),
    ),
    ("words", "array('x', NULL)", "CAST(NULL AS ARRAY<STRING>)", ["x", None], None),
    ("nested", "array(array(1), array())", "array(array(2, 3))", [[1], []], [[2, 3]]),
    (
        "rec",
        "named_struct('bin', X'01', 'dec', CAST(1.5 AS DECIMAL(4,2)), 'd', DATE'1970-01-02', "
        "'m', map('k', 1L), 'n', CAST(NULL AS STRING))",
        "CAST(NULL AS STRUCT<bin: BINARY, dec: DECIMAL(4,2), d: DATE, m: MAP<STRING, BIGINT>, n: STRING>)",
        {"bin": "AQ==", "dec": "1.50", "d": 1, "m": {"k": 1}, "n": None},
        None,
    ),
    ("lookup", "map(1, 'one', 2, NULL)", "map(3, 'three')", [[1, "one"], [2, None]], [[3, "three"]]),
    (
        "cal",
        "make_interval(1, 2, 1, 3, 4, 5, 6.000007)",
        "make_interval(0, 0, 0, 0, 0, 0, 0)",
        {"months": 14, "days": 10, "microseconds": 14706000007},
        {"months": 0, "days": 0, "microseconds": 0},
    ),
    ("nothing", "CAST(NULL AS VOID)", "CAST(NULL AS VOID)", None, None),
]
# Spark 3.5's Python API cannot read a schema with a CALENDAR INTERVAL (pyspark 4.0) or TIME (Spark 4.1) column.
_NEWER_TYPES = {"tod": "TimeType", "cal": "CalendarIntervalType"}
TYPES = [spec for spec in TYPES if hasattr(pyspark.sql.types, _NEWER_TYPES.get(spec[0], "DataType"))]


def every_type_frame(session):
    rows = []
    for row in (0, 1):
        picks = ", ".join(f"{spec[1 + row]} AS {spec[0]}" for spec in TYPES)
        rows.append(f"SELECT {row}L AS id, {picks}")
    return session.sql(" UNION ALL ".join(rows)).coalesce(1)


def test_every_spark_type_round_trips(session, tmp_path):
    out = str(tmp_path / "types")
    result = dataframe_to_mds(every_type_frame(session), out, hashes=("sha1", "xxh64"), progress=False)
    assert (result.samples, result.shards, result.table_version) == (2, 1, None)
    index = load_index(out)
    assert set(index) == {"shards", "version"} and index["version"] == 2
    shard = index["shards"][0]
    assert set(shard) == MDS_SHARD_KEYS
    assert shard["compression"] == "zstd" and set(shard["zip_data"]["hashes"]) == {"sha1", "xxh64"}
    assert (
        shard["zip_data"]["basename"] == f"{result.run}/part-00000-attempt-"
        f"{shard['zip_data']['basename'].split('-attempt-')[1].split('/')[0]}/shard.00000.mds.zstd"
    )
    assert_no_orphans(out)
    samples = sorted(read_samples(out), key=lambda sample: int(sample["id"]))
    for row, sample in enumerate(samples):
        assert set(sample) == {"id"} | {spec[0] for spec in TYPES}
        for name, _, _, first, second in TYPES:
            assert_same_value(sample[name], (first, second)[row], f"row {row} column {name}")


def test_declared_json_keeps_nulls_of_every_scalar_type(spark, tmp_path):
    scalars = [spec for spec in TYPES if not isinstance(spec[3], (np.ndarray, list, dict)) and spec[3] is not None]
    picks = ", ".join(f"CASE WHEN id = 0 THEN {spec[1]} END AS {spec[0]}" for spec in scalars)
    frame = spark.sql(f"SELECT id, {picks} FROM range(2)").coalesce(1)
    columns = {"id": "int64", **{spec[0]: "json" for spec in scalars}}
    dataframe_to_mds(frame, str(tmp_path / "out"), columns=columns, compression=None, progress=False)
    first, second = sorted(read_samples(str(tmp_path / "out")), key=lambda sample: int(sample["id"]))
    assert all(second[spec[0]] is None for spec in scalars)
    assert (
        first["i64"] == -(2**63)
        and first["flag"] is True
        and first["dec38"] == "-12345678901234567890.123456789012345678"
    )
    assert first["blob"] == "AP8=" and first["day"] == -1 and first["ymi"] == -14 and np.isnan(first["f32"])


def test_null_in_a_native_column_fails_naming_column_and_choices(session, tmp_path):
    frame = session.sql("SELECT id, CASE WHEN id = 3 THEN NULL ELSE id END AS maybe FROM range(5)").coalesce(1)
    with pytest.raises(Exception) as err:
        dataframe_to_mds(frame, str(tmp_path / "out"), progress=False, nulls="error")
    message = str(err.value)
    assert "row 3: column 'maybe' (encoding 'int64') holds a NULL" in message
    assert "columns={'maybe': 'json'}" in message
    assert files_under(str(tmp_path / "out")) == set()


def test_empty_and_skewed_partitions(session, tmp_path):
    frame = (
        session.sql(
            "SELECT id, CASE WHEN id < 180 THEN 0 ELSE 1 END AS k, repeat('x', CAST(id % 7 AS INT)) AS s "
            "FROM range(200)"
        )
        .repartition(6, "k")
        .drop("k")
    )
    result = dataframe_to_mds(frame, str(tmp_path / "out"), size_limit="1kb", progress=False)
    folders = {info["raw_data"]["basename"].rsplit("/", 1)[0] for info in load_index(str(tmp_path / "out"))["shards"]}
    assert result.samples == 200 and 1 <= len(folders) <= 2  # 6 partitions, at most 2 with rows (180 and 20)
    assert_no_orphans(str(tmp_path / "out"))
    samples = read_samples(str(tmp_path / "out"))
    assert sorted(int(sample["id"]) for sample in samples) == list(range(200))
    assert all(sample["s"] == "x" * (int(sample["id"]) % 7) for sample in samples)


def test_zero_rows_give_a_valid_empty_dataset(session, tmp_path):
    out = str(tmp_path / "empty")
    result = dataframe_to_mds(session.range(0).selectExpr("id", "CAST(id AS STRING) AS s"), out, progress=False)
    assert (result.samples, result.shards, result.bytes) == (0, 0, 0)
    assert load_index(out) == {"shards": [], "version": 2}
    assert files_under(out) == {
        "index.json",
        "mds_conversion.json",
        "_mds_log/00000000000000000001.json",
        "_mds_log/index.json",
    }
    assert read_samples(out) == []


def test_modes(session, tmp_path):
    out = str(tmp_path / "ds")
    first = session.range(0, 10, 1, 2).selectExpr("id", "CAST(id AS STRING) AS s")
    second = session.range(100, 105, 1, 1).selectExpr("id", "CAST(id AS STRING) AS s")
    dataframe_to_mds(first, out, progress=False)
    with pytest.raises(FileExistsError, match=r"is not empty .* mode='overwrite' .* mode='append'"):
        dataframe_to_mds(second, out, progress=False)
    appended = dataframe_to_mds(second, out, mode="append", progress=False)
    assert appended.samples == 5
    assert_no_orphans(out)
    assert sorted(int(s["id"]) for s in read_samples(out)) == list(range(10)) + list(range(100, 105))
    runs = json.loads(open(os.path.join(out, "mds_conversion.json")).read())["runs"]
    assert [run["samples"] for run in runs] == [10, 5]
    replaced = dataframe_to_mds(second, out, mode="overwrite", compression=None, progress=False)
    assert_no_orphans(out)
    top_level = {"index.json", "mds_conversion.json", "_mds_log/index.json", *commit_files(out)}
    assert all(path.startswith(replaced.run) for path in files_under(out) - top_level)
    assert sorted(int(s["id"]) for s in read_samples(out)) == list(range(100, 105))


def test_append_refuses_other_columns_and_a_failed_job_changes_nothing(spark, tmp_path):
    out = str(tmp_path / "ds")
    dataframe_to_mds(spark.range(3).selectExpr("id"), out, compression=None, progress=False)
    before = files_under(out)
    with pytest.raises(ValueError, match=r"Cannot append .* columns \{'id': 'int64'\} .* \{'id': 'int32'\}"):
        dataframe_to_mds(spark.range(3).selectExpr("CAST(id AS INT) AS id"), out, mode="append", progress=False)
    failing = spark.sql("SELECT CASE WHEN id = 2 THEN NULL ELSE id END AS id FROM range(4)")
    with pytest.raises(Exception, match="holds a NULL"):
        dataframe_to_mds(failing, out, mode="append", size_limit="100b", progress=False, nulls="error")
    assert files_under(out) == before


def flaky_frame(session, failed: str | None):
    """A frame whose partition 0 fails on its first attempt after some batches were already written (when
    ``failed`` names a file: the failed attempt's task attempt id is written there)."""
    from pyspark import TaskContext

    frame = session.range(0, 600, 1, 3).selectExpr("id", "repeat(CAST(id AS STRING), 5) AS s")

    def passthrough(batches):
        context = TaskContext.get()
        for number, batch in enumerate(batches):
            yield batch
            if failed and number == 1 and context.partitionId() == 0 and context.attemptNumber() == 0:
                with open(failed, "w") as file:
                    file.write(str(context.taskAttemptId()))
                raise RuntimeError("injected failure on the first attempt")

    return frame.mapInArrow(passthrough, frame.schema)


def test_task_failures_are_retried_and_leave_no_trace(session, tmp_path):
    clean = dataframe_to_mds(
        flaky_frame(session, None), str(tmp_path / "clean"), size_limit="2kb", compression=None, progress=False
    )
    failed = tmp_path / "failed-attempt"
    retried = dataframe_to_mds(
        flaky_frame(session, str(failed)), str(tmp_path / "retried"), size_limit="2kb", compression=None, progress=False
    )
    attempts = {}
    for shard in load_index(str(tmp_path / "retried"))["shards"]:
        folder = shard["raw_data"]["basename"].split("/")[1]
        attempts[int(folder[5:10])] = int(folder.rsplit("-", 1)[1])
    # Partition 0 was committed from its retry, not from the attempt that failed (which left no folder behind).
    assert attempts.keys() == {0, 1, 2} and attempts[0] != int(failed.read_text())
    assert (retried.samples, retried.shards) == (clean.samples, clean.shards) == (600, clean.shards)
    assert_no_orphans(str(tmp_path / "retried"))
    assert read_samples(str(tmp_path / "retried")) == read_samples(str(tmp_path / "clean"))


def test_a_speculative_copy_that_lost_is_deleted(session, tmp_path, monkeypatch):
    from pyspark import TaskContext

    from streaming.convert.attempt import TaskConfig, write_attempt

    out = str(tmp_path / "spec")
    monkeypatch.setattr("streaming.convert.driver.new_run_id", lambda: "run-fixed")
    loser = TaskConfig(
        destination=out,
        run="run-fixed",
        columns={"id": "int64", "s": "str"},
        compression="zstd",
        hashes=(),
        size_limit=2048,
        direct=True,
    )

    def with_speculative_twin(batches):
        batches = list(batches)
        if TaskContext.get().partitionId() == 1:
            write_attempt(loser, iter(batches), 1, 999_999)  # a complete copy whose result Spark never keeps
        yield from batches

    frame = session.range(0, 300, 1, 2).selectExpr("id", "repeat(CAST(id AS STRING), 9) AS s")
    twin_frame = frame.mapInArrow(with_speculative_twin, frame.schema)
    result = dataframe_to_mds(twin_frame, out, size_limit="2kb", progress=False)
    assert result.run == "run-fixed" and result.samples == 300
    assert not [path for path in files_under(out) if "attempt-999999" in path]
    assert_no_orphans(out)
    samples = read_samples(out)
    assert [int(s["id"]) for s in samples] == list(range(300))  # partition order, each row once
    assert all(s["s"] == str(int(s["id"])) * 9 for s in samples)


def test_streamed_upload_keeps_executor_disk_small(session, tmp_path, monkeypatch):
    monkeypatch.setattr(DatasetRoot, "is_local", property(lambda self: False))
    frame = session.range(0, 4000, 1, 2).selectExpr("id", "sha2(CAST(id AS STRING), 256) AS s")
    result = dataframe_to_mds(frame, str(tmp_path / "out"), size_limit="16kb", compression=None, progress=False)
    assert result.shards > 10
    assert 0 < result.peak_local_bytes <= 4 * 16 * 1024
    files = files_under(str(tmp_path / "out"))
    assert len([path for path in files if path.endswith("/index.json") and "-attempt-" in path]) == 2
    assert sorted(int(s["id"]) for s in read_samples(str(tmp_path / "out"))) == list(range(4000))


def test_progress_bar_shows_tasks_rows_and_bytes(spark, tmp_path, capsys):
    dataframe_to_mds(spark.range(0, 50, 1, 3), str(tmp_path / "out"), progress=True)
    err = capsys.readouterr().err
    assert "3/3" in err and "rows=50" in err and "bytes=" in err


def test_bad_arguments_fail_before_any_job(spark, tmp_path):
    frame = spark.range(3)
    with pytest.raises(ValueError, match="mode must be one of 'error', 'overwrite', 'append'"):
        dataframe_to_mds(frame, str(tmp_path / "a"), mode="replace")
    with pytest.raises(ValueError, match="zstd"):
        dataframe_to_mds(frame, str(tmp_path / "b"), compression="zip")
    with pytest.raises(ValueError, match="version"):
        dataframe_to_mds(frame, str(tmp_path / "c"), version=3)
    with pytest.raises(TypeError, match="Expected a DataFrame, a table name or a Delta table path"):
        dataframe_to_mds(pa.table({"a": [1]}), str(tmp_path / "d"))
    assert not os.path.exists(tmp_path / "a")
