"""Issue 32's reproductions on tables Delta Lake itself wrote through Spark SQL, one test per thing a user saw.

Spark's reader reads a table by name, as the scheduled job does on Databricks; delta-rs reads the table's folder,
as the command line (``mds-streaming incremental``) does, in a process of its own (no Spark session in it). Each
test compares what the dataset holds with the rows Delta Lake's own reader gives for the table, and each failed on
the code before its fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from streaming import LocalDataset
from streaming.spark import incremental_to_mds

#: Every Delta command is a Spark job or several: a test of a few commands and runs takes minutes on a busy machine.
pytestmark = pytest.mark.timeout(1800)
MDS_STREAMING = str(Path(sys.executable).with_name("mds-streaming"))
#: Deletion vectors on (as many workspaces make new tables), and no Change Data Feed: the changed files are read.
VECTORS = "'delta.enableDeletionVectors' = 'true'"
NO_VECTORS = "'delta.enableDeletionVectors' = 'false'"


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _dataset(out: str | Path) -> Counter:
    """The dataset's samples, as a multiset of JSON texts."""
    return Counter(
        json.dumps({k: _plain(v) for k, v in sample.items()}, sort_keys=True) for sample in LocalDataset(str(out))
    )


def _table(spark: Any, name: str, columns: list[str]) -> Counter:
    """The table's rows as Delta Lake's reader gives them, in `_dataset`'s spelling."""
    rows = spark.sql(f"SELECT {', '.join(f'`{c}`' for c in columns)} FROM {name}").collect()
    return Counter(json.dumps(row.asDict(), sort_keys=True) for row in rows)


def _location(spark: Any, name: str) -> str:
    """The table's folder (what delta-rs reads)."""
    location = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"]
    return location.removeprefix("file:")


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``mds-streaming`` in a process of its own: delta-rs reads the path there, as on a machine without Spark."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK")}
    return subprocess.run([MDS_STREAMING, *argv, "--quiet"], capture_output=True, text=True, env=env, timeout=600)


def _incremental(table: str, out: str | Path, *options: str) -> subprocess.CompletedProcess:
    done = _cli("incremental", table, str(out), *options)
    assert done.returncode == 0, done.stderr
    return done


def _mirror(spark: Any, name: str, out: Path, **options: Any) -> Any:
    return incremental_to_mds(name, str(out), mode="mirror", spark=spark, progress=False, **options)


# -- Spark's reader, a table by name ---------------------------------------------------------------------------
def test_deletes_updates_and_merges_made_with_deletion_vectors_reach_a_mirror_of_a_table_by_name(
    delta_session, table_name, tmp_path
):
    """Issue 32, case 1: the files' paths stay, their deletion vectors change; the mirror kept deleted rows and
    both values of an updated row."""
    spark, out = delta_session, tmp_path / "mirror"
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING delta TBLPROPERTIES ({VECTORS})")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e'), (6, 'f')")
    _mirror(spark, table_name, out, key=["id"])
    changes = (
        f"DELETE FROM {table_name} WHERE id = 1",
        f"MERGE INTO {table_name} t USING (SELECT * FROM VALUES (3, 'x'), (4, 'merged'), (10, 'new') AS s(id, v)) s "
        f"ON t.id = s.id WHEN MATCHED AND s.id = 3 THEN DELETE WHEN MATCHED THEN UPDATE SET v = s.v "
        f"WHEN NOT MATCHED THEN INSERT *",
    )
    for change in changes:
        spark.sql(change)
        result = _mirror(spark, table_name, out, key=["id"])
        assert _dataset(out) == _table(spark, table_name, ["id", "v"]), change
        assert result.method == "full_snapshot_diff"  # a diff of paths cannot see a vector: both versions whole
    history = spark.sql(f"DESCRIBE HISTORY {table_name}").collect()
    vectors = [
        sum(int(count) for name, count in row["operationMetrics"].items() if "DeletionVectorsAdded" in name)
        for row in history
        if row["version"] > 1
    ]
    assert all(vectors), f"every change wrote a deletion vector: {vectors}"


def test_rows_in_partitions_whose_values_need_escaping_are_appended_and_removed(delta_spark, table_name, tmp_path):
    """Issue 32, case 2: ``inputFiles()`` and ``_metadata.file_path`` spell the folder of ``a b``, ``x:y`` or
    ``50%`` differently, so the changed files matched no row: nothing added or removed, the version recorded."""
    spark, out = delta_spark, tmp_path / "mirror"
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, p STRING) USING delta PARTITIONED BY (p) TBLPROPERTIES ({NO_VECTORS})"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a b'), (2, 'x:y'), (3, '50%'), (4, 'a+b'), (5, 'plain')")
    _mirror(spark, table_name, out, key=["id"])
    spark.sql(f"INSERT INTO {table_name} VALUES (11, 'a b'), (12, 'x:y'), (13, '50%'), (14, 'a+b')")
    spark.sql(f"DELETE FROM {table_name} WHERE id IN (1, 2, 3, 4)")
    result = _mirror(spark, table_name, out, key=["id"])
    assert (result.method, result.samples, result.removed) == ("snapshot_diff", 4, 4)
    assert _dataset(out) == _table(spark, table_name, ["id", "p"])


def test_a_mirror_of_a_table_by_name_without_a_key_is_keyed_by_its_row_ids(delta_spark, table_name, tmp_path):
    """Issue 32, case 3: row ids were read from the log by delta-rs only, so a table by name had to give a key."""
    spark, out = delta_spark, tmp_path / "mirror"
    spark.sql(
        f"CREATE TABLE {table_name} (v STRING) USING delta "
        f"TBLPROPERTIES ('delta.enableRowTracking' = 'true', {NO_VECTORS})"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES ('a'), ('a'), ('b'), ('c')")  # no column tells the rows apart
    _mirror(spark, table_name, out)
    spark.sql(f"UPDATE {table_name} SET v = 'updated' WHERE v = 'b'")
    spark.sql(f"DELETE FROM {table_name} WHERE v = 'c'")
    spark.sql(f"INSERT INTO {table_name} VALUES ('a')")
    result = _mirror(spark, table_name, out)
    assert (result.removed, result.samples) == (2, 2)  # the updated row's old value and the deleted row; new ones
    ids = spark.sql(f"SELECT _metadata.row_id AS _row_id, v FROM {table_name}").collect()
    assert _dataset(out) == Counter(json.dumps(row.asDict(), sort_keys=True) for row in ids)


# -- delta-rs's reader, a path and the command line -------------------------------------------------------------
def test_a_column_mapped_table_with_renamed_columns_is_stored_with_its_values_not_nulls(
    delta_spark, table_name, tmp_path
):
    """Issue 32, case 4: delta-rs's Arrow reader looked up logical names in files that hold physical ones."""
    spark = delta_spark
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, `first name` STRING, old STRING) USING delta "
        f"TBLPROPERTIES ('delta.columnMapping.mode' = 'name', {NO_VECTORS})"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x'), (2, 'b', 'y'), (3, 'c', 'z')")
    spark.sql(f"ALTER TABLE {table_name} RENAME COLUMN old TO renamed")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 2")
    path, columns = _location(spark, table_name), ["id", "first name", "renamed"]
    _incremental(path, str(tmp_path / "append"))
    _incremental(path, str(tmp_path / "mirror"), "--mode", "mirror", "--key", "id")
    _cli_convert = _cli("convert", path, str(tmp_path / "converted"))
    assert _cli_convert.returncode == 0, _cli_convert.stderr
    for out in ("append", "mirror", "converted"):
        assert _dataset(tmp_path / out) == _table(spark, table_name, columns), out
    spark.sql(f"INSERT INTO {table_name} VALUES (4, 'd', 'w')")
    spark.sql(f"UPDATE {table_name} SET renamed = 'updated' WHERE id = 1")
    _incremental(path, str(tmp_path / "mirror"), "--mode", "mirror", "--key", "id")
    assert _dataset(tmp_path / "mirror") == _table(spark, table_name, columns)


def test_a_repartitioning_overwrite_with_the_same_rows_appends_nothing(delta_spark, table_name, tmp_path):
    """Issue 32, case 6: the files the overwrite removed were read with the new partition columns, so their old
    partition values came back NULL and every row was appended again."""
    spark, out = delta_spark, tmp_path / "append"
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, p STRING, q STRING) USING delta PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x'), (2, 'b', 'y'), (3, 'b', 'x')")
    path = _location(spark, table_name)
    _incremental(path, str(out))
    rows = spark.read.table(table_name).localCheckpoint()
    rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy("q").saveAsTable(
        table_name
    )
    assert spark.sql(f"DESCRIBE DETAIL {table_name}").collect()[0]["partitionColumns"] == ["q"]
    _incremental(path, str(out))
    assert _dataset(out) == _table(spark, table_name, ["id", "p", "q"])


def test_after_log_cleanup_the_job_names_the_version_and_resync_recovers(delta_spark, table_name, tmp_path):
    """Issue 32, case 7: once ``delta.logRetentionDuration`` removed the commit files the run needs, it stopped with
    delta-rs's raw ``TableNotFoundError: No files in log segment``.

    The test removes the commit files before the checkpoint at version 4 itself, as log cleanup removes them: Delta's
    own cleanup compares file times, truncated to the day, with a retention of at least a day (aging the files'
    times did not make Delta 4.1 clean them up here)."""
    spark, out = delta_spark, tmp_path / "append"
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    spark.sql(f"INSERT INTO {table_name} VALUES (1)")
    path = _location(spark, table_name)
    _incremental(path, str(out))
    for value in (2, 3, 4, 5):
        spark.sql(f"INSERT INTO {table_name} VALUES ({value})")
    log = Path(path) / "_delta_log"
    assert (log / f"{4:020d}.checkpoint.parquet").exists(), sorted(item.name for item in log.iterdir())
    for version in range(4):
        for name in (f"{version:020d}.json", f"{version:020d}.crc", f".{version:020d}.json.crc"):
            (log / name).unlink(missing_ok=True)
    done = _cli("incremental", path, str(out))
    assert done.returncode == 1
    assert "IncrementalHistoryError" in done.stderr and "Version 2 is the first one missing" in done.stderr
    assert "resync=True" in done.stderr
    _incremental(path, str(out), "--resync")
    assert _dataset(out) == _table(spark, table_name, ["id"])


def test_an_empty_partition_value_is_stored_as_null_by_every_run(tmp_path):
    """Issue 32, case 5: the protocol reads an empty partition value as NULL; the first run did, the changed files
    stored ``''``. Spark writes such a value as NULL itself, so delta-rs writes this table."""
    from deltalake import write_deltalake

    table, out = str(tmp_path / "table"), tmp_path / "append"
    write_deltalake(table, pa.table({"id": [1, 2], "p": ["", "a"]}), partition_by=["p"])
    _incremental(table, str(out))
    write_deltalake(table, pa.table({"id": [3, 4], "p": ["", "a"]}), partition_by=["p"], mode="append")
    _incremental(table, str(out))
    stored = sorted((sample["id"].item(), sample["p"]) for sample in LocalDataset(str(out)))
    assert stored == [(1, None), (2, "a"), (3, None), (4, "a")]


def test_dataframe_to_mds_of_a_column_mapped_table_with_deletion_vectors_stores_its_rows(
    delta_session, table_name, tmp_path
):
    """Issue 32, Deliver 4: Spark's reader applies the mapping and the vectors; the conversion stores what it reads."""
    from streaming.spark import dataframe_to_mds

    spark = delta_session
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, `a column` STRING, gone STRING) USING delta "
        f"TBLPROPERTIES ('delta.columnMapping.mode' = 'id', {VECTORS})"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 'x'), (2, 'b', 'y'), (3, 'c', 'z')")
    spark.sql(f"ALTER TABLE {table_name} DROP COLUMN gone")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 2")
    dataframe_to_mds(spark.read.table(table_name), str(tmp_path / "out"), spark=spark, progress=False)
    assert _dataset(tmp_path / "out") == _table(spark, table_name, ["id", "a column"])
