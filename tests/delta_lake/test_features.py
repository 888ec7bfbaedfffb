"""Each Delta table feature the scheduled job meets, on tables Delta Lake itself wrote through Spark SQL.

Every test follows one table with Spark's reader (the table by name) and delta-rs's (its folder), in append and
mirror mode (`tests.delta_lake.followed`), and checks after every run that each dataset holds exactly what the
stated semantics say (the mirror: the table's rows; append: what each run's version added). Where a reader
cannot read a feature the job refuses, and the test checks the refusal's words. docs/incremental-job.md's
"Delta table features, reader by reader" states what these tests show.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.delta_lake.followed import DELTA_RS, SPARK, Followed, latest_version, table_location

#: Every Delta command is a Spark job or several: a test of a few commands and runs takes minutes on a busy machine.
pytestmark = pytest.mark.timeout(1800)
NO_VECTORS = "'delta.enableDeletionVectors' = 'false'"
VECTORS = "'delta.enableDeletionVectors' = 'true'"


def _values(rows: list[tuple]) -> str:
    return ", ".join("(" + ", ".join(repr(value) for value in row) + ")" for row in rows)


@pytest.mark.parametrize("vectors", [True, False], ids=["deletion-vectors", "no-deletion-vectors"])
def test_the_change_data_feed_read_by_name_and_by_path(delta_session, table_name, tmp_path, vectors):
    """Spark reads the feed with ``readChangeFeed``; delta-rs's feed reader gets deletes made with deletion vectors
    wrong (another file's rows), so over such versions delta-rs reads the changed files, and a run that requires
    the feed is refused naming the table, the version and the feature."""
    from streaming.incremental import incremental_to_mds as delta_rs_incremental_to_mds

    spark = delta_session
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING delta "
        f"TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', {VECTORS if vectors else NO_VECTORS})"
    )
    # One file (version 1), so the UPDATE (version 3) keeps it with a deletion vector, not rewriting it whole.
    spark.sql(f"INSERT INTO {table_name} SELECT /*+ COALESCE(1) */ * FROM VALUES (1, 'a'), (2, 'b'), (3, 'c') s(id, v)")
    followed = Followed(spark, table_name, tmp_path, ["id", "v"], ["id"])
    followed.catch_up()
    path = table_location(spark, table_name)
    spark.sql(f"INSERT INTO {table_name} VALUES (4, 'd')")
    spark.sql(f"UPDATE {table_name} SET v = 'updated' WHERE id = 2")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 3")
    if vectors:
        with pytest.raises(ValueError) as refused:
            delta_rs_incremental_to_mds(path, str(followed.out("delta-rs", "append")), change_data_feed=True)
        assert str(refused.value) == (
            f"change_data_feed=True but the Change Data Feed of {path!r} cannot be read for versions 2..4 with this "
            f"reader: version 3 of {path} wrote deletion vectors, whose changes delta-rs's Change Data Feed reader "
            f"gets wrong. Choices: change_data_feed=None to read those versions' changed files."
        )
    methods = {name: result.method for name, result in followed.catch_up().items()}
    delta_rs = "snapshot_diff" if vectors else "change_data_feed"
    assert methods == {
        "spark-append": "change_data_feed",
        "spark-mirror": "change_data_feed",
        "delta-rs-append": delta_rs,
        "delta-rs-mirror": delta_rs,
    }
    spark.sql(f"DELETE FROM {table_name} WHERE id = 1")
    followed.options["change_data_feed"] = True if not vectors else None
    followed.catch_up()


def test_a_liquid_clustered_table_through_optimize(delta_session, table_name, tmp_path):
    spark = delta_session
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING delta CLUSTER BY (id)")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')")
    followed = Followed(spark, table_name, tmp_path, ["id", "v"], ["id"])
    followed.catch_up()
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c'), (4, 'd')")
    spark.sql(f"OPTIMIZE {table_name}")  # clusters the files: rows unchanged
    spark.sql(f"DELETE FROM {table_name} WHERE id = 1")
    followed.catch_up()
    detail = spark.sql(f"DESCRIBE DETAIL {table_name}").collect()[0]
    assert list(detail["clusteringColumns"]) == ["id"]


def test_optimize_alone_appends_and_removes_nothing(delta_session, table_name, tmp_path):
    spark = delta_session
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING delta TBLPROPERTIES ({NO_VECTORS})")
    for row in range(3):
        spark.sql(f"INSERT INTO {table_name} VALUES ({row}, 'v{row}')")
    followed = Followed(spark, table_name, tmp_path, ["id", "v"], ["id"])
    followed.catch_up()
    spark.sql(f"OPTIMIZE {table_name}")
    results = followed.catch_up()
    assert {name: (result.samples, result.removed) for name, result in results.items()} == dict.fromkeys(
        results, (0, 0)
    )


def test_restore_and_create_or_replace(delta_session, table_name, tmp_path):
    spark = delta_session
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING delta TBLPROPERTIES ({NO_VECTORS})")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')")
    followed = Followed(spark, table_name, tmp_path, ["id", "v"], ["id"])
    followed.catch_up()
    restore_to = latest_version(spark, table_name)
    spark.sql(f"DELETE FROM {table_name} WHERE id = 1")
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c')")
    followed.catch_up()
    spark.sql(f"RESTORE TABLE {table_name} TO VERSION AS OF {restore_to}")
    followed.catch_up()
    spark.sql(
        f"CREATE OR REPLACE TABLE {table_name} USING delta TBLPROPERTIES ({NO_VECTORS}) AS "
        f"SELECT CAST(id AS BIGINT) AS id, v FROM VALUES (2, 'b'), (5, 'e') AS s(id, v)"
    )
    followed.catch_up()


def test_vacuum_of_files_the_next_run_needs_is_named_and_resync_recovers(delta_session, table_name, tmp_path):
    spark = delta_session
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING delta TBLPROPERTIES ({NO_VECTORS})")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')")
    followed = Followed(spark, table_name, tmp_path, ["id", "v"], ["id"])
    followed.catch_up()
    spark.sql(f"INSERT OVERWRITE {table_name} VALUES (2, 'b'), (3, 'c')")
    spark.sql(f"VACUUM {table_name} RETAIN 0 HOURS")
    from streaming.incremental import IncrementalHistoryError

    for reader in followed.readers:
        with pytest.raises(IncrementalHistoryError, match=r"resync=True") as raised:
            followed.run(reader, "append")
        assert raised.value.version == 2, (reader, str(raised.value))
    followed.options["resync"] = True
    with pytest.raises(ValueError, match=r"resync=True with mode='mirror' reads .* with delta-rs only"):
        followed.run(SPARK, "mirror")  # documented: a mirror by name cannot resync
    followed.catch_up(skip=("spark-mirror",))


def test_timestamp_ntz_columns(delta_session, table_name, tmp_path):
    spark = delta_session
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, at TIMESTAMP_NTZ) USING delta TBLPROPERTIES ({NO_VECTORS})")
    spark.sql(f"INSERT INTO {table_name} VALUES (1, TIMESTAMP_NTZ'2024-01-02 03:04:05.123456'), (2, NULL)")
    followed = Followed(spark, table_name, tmp_path, ["id", "at"], ["id"])
    followed.catch_up()
    spark.sql(f"INSERT INTO {table_name} VALUES (3, TIMESTAMP_NTZ'1969-12-31 23:59:59')")
    spark.sql(f"UPDATE {table_name} SET at = TIMESTAMP_NTZ'2030-06-07 08:09:10' WHERE id = 1")
    followed.catch_up()


def test_v2_checkpoints_with_sidecars(delta_session, table_name, tmp_path):
    spark = delta_session
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, v STRING) USING delta TBLPROPERTIES "
        f"('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '2', {NO_VECTORS})"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, 'b')")
    followed = Followed(spark, table_name, tmp_path, ["id", "v"], ["id"])
    followed.catch_up()
    for row in range(3, 6):
        spark.sql(f"INSERT INTO {table_name} VALUES ({row}, 'v{row}')")
    spark.sql(f"DELETE FROM {table_name} WHERE id = 2")
    log = Path(table_location(spark, table_name)) / "_delta_log"
    assert list((log / "_sidecars").glob("*.parquet")), sorted(item.name for item in log.iterdir())
    assert any(".checkpoint." in item.name for item in log.iterdir())
    followed.catch_up()


@pytest.mark.parametrize(
    "widened",
    [
        ("INT", "BIGINT", "1", "3000000000"),
        ("FLOAT", "DOUBLE", "1.5", "1e300"),
        ("SMALLINT", "INT", "1", "100000"),  # what Delta 3.x widens too (its feature: typeWidening-preview)
    ],
    ids=["int-bigint", "float-double", "smallint-int"],
)
def test_a_column_widened_by_type_widening(delta_session, table_name, tmp_path, widened):
    """Both readers read a widened column (delta-rs's: older files cast up, `streaming.delta.widening`); a dataset
    holding the narrow type is refused by both, naming the table, the version and the column."""
    narrow, wide, small, large = widened
    spark = delta_session
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, x {narrow}) USING delta "
        f"TBLPROPERTIES ('delta.enableTypeWidening' = 'true', {NO_VECTORS})"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, {small})")
    followed = Followed(spark, table_name, tmp_path, ["id", "x"], ["id"])
    followed.catch_up()
    spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN x TYPE {wide}")
    spark.sql(f"INSERT INTO {table_name} VALUES (2, {large})")
    path, version = table_location(spark, table_name), latest_version(spark, table_name)
    old, new = {"INT": ("int32", "int64"), "FLOAT": ("float32", "float64"), "SMALLINT": ("int16", "int32")}[narrow]
    for reader, table in ((SPARK, table_name), (DELTA_RS, path)):
        for mode in ("append", "mirror"):  # the dataset's shards hold the narrow type: refused, nothing written
            with pytest.raises(ValueError) as refused:
                followed.run(reader, mode)
            assert str(refused.value) == (
                f"Version {version} of {table!r} widened the type of x ({old} -> {new}) (Delta type widening, "
                f"delta.enableTypeWidening): its values may no longer fit the dataset's shards. Choices: convert "
                f"the table again into a new dataset (dataframe_to_mds({table!r}, out, mode='overwrite'))."
            )
    followed.root, followed.previous = tmp_path / "rebuilt", None  # a new dataset reads the widened column
    followed.catch_up()


def test_log_cleanup_by_delta_itself_is_named_and_resync_recovers(delta_session, table_name, tmp_path):
    """Delta deletes commit files older than ``delta.logRetentionDuration`` (by their file times, truncated to the
    day) when it writes a checkpoint; the files' times are set three days back so that the next checkpoint cleans."""
    from streaming.incremental import IncrementalHistoryError

    spark = delta_session
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT) USING delta TBLPROPERTIES "
        f"('delta.checkpointInterval' = '2', 'delta.logRetentionDuration' = 'interval 1 days', "
        f"'delta.deletedFileRetentionDuration' = 'interval 1 days', {NO_VECTORS})"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1)")
    followed = Followed(spark, table_name, tmp_path, ["id"], ["id"])
    followed.catch_up()
    log = Path(table_location(spark, table_name)) / "_delta_log"
    for value in (2, 3):
        spark.sql(f"INSERT INTO {table_name} VALUES ({value})")
    aged = time.time() - 3 * 86400
    for item in log.iterdir():
        if item.is_file():
            os.utime(item, (aged, aged))
    for value in (4, 5, 6):
        spark.sql(f"INSERT INTO {table_name} VALUES ({value})")
    assert not (log / f"{0:020d}.json").exists(), sorted(item.name for item in log.iterdir())
    for reader in followed.readers:
        with pytest.raises(IncrementalHistoryError, match=r"resync=True") as raised:
            followed.run(reader, "append")
        assert raised.value.version == 2, (reader, str(raised.value))
    followed.options["resync"] = True
    followed.catch_up(skip=("spark-mirror",))
