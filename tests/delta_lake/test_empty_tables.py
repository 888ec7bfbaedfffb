"""Issue 45, item 1: Delta tables without rows, as Delta Lake itself writes them (created empty, or every file
removed by a DELETE), convert to an empty dataset with the log's schema: ``mds-streaming convert`` without Spark,
``dataframe_to_mds`` of the path in Spark, and the scheduled job with both readers in both modes, whose later runs
append or mirror into it. Spark's reader is the oracle (zero rows, its columns).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming import LocalDataset
from tests.delta_lake.followed import Followed, table_location

pytestmark = pytest.mark.timeout(1800)
MDS_STREAMING = os.path.join(os.path.dirname(sys.executable), "mds-streaming")
#: What the reference's MDSWriter (streaming-community 0.14.2) writes for no samples, and dataframe_to_mds of an
#: empty DataFrame (tests/spark/test_convert.py).
EMPTY_INDEX = {"shards": [], "version": 2}
COLUMNS = {"id": "int64", "name": "str", "score": "float64"}


def _empty(spark, table_name: str, how: str) -> str:
    spark.sql(f"CREATE TABLE {table_name} (id BIGINT, name STRING, score DOUBLE) USING delta")
    if how == "deleted":
        spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a', 0.5), (2, 'b', 1.5)")
        spark.sql(f"DELETE FROM {table_name}")
    assert spark.read.table(table_name).count() == 0
    return table_location(spark, table_name)


def _conversion_columns(out: Path) -> dict[str, str]:
    return json.loads((out / "mds_conversion.json").read_text())["latest"]["columns"]


@pytest.mark.parametrize("how", ["created", "deleted"])
def test_an_empty_table_converts_to_an_empty_dataset_with_and_without_spark(delta_spark, table_name, tmp_path, how):
    from streaming.spark import dataframe_to_mds

    spark = delta_spark
    path = _empty(spark, table_name, how)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK")}
    done = subprocess.run(
        [MDS_STREAMING, "convert", path, str(tmp_path / "cli"), "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    dataframe_to_mds(spark.read.format("delta").load(path), str(tmp_path / "spark"), spark=spark, progress=False)
    spark_types = {field.name: field.dataType.simpleString() for field in spark.read.table(table_name).schema}
    assert spark_types == {"id": "bigint", "name": "string", "score": "double"}
    for out in (tmp_path / "cli", tmp_path / "spark"):
        assert json.loads((out / "index.json").read_text()) == EMPTY_INDEX, out
        assert _conversion_columns(out) == COLUMNS, out
        assert len(LocalDataset(str(out))) == 0


@pytest.mark.parametrize("how", ["created", "deleted"])
def test_the_job_over_a_table_that_starts_empty(delta_spark, table_name, tmp_path, how):
    spark = delta_spark
    _empty(spark, table_name, how)
    followed = Followed(spark, table_name, tmp_path, list(COLUMNS), ["id"])
    first = followed.catch_up()
    for name, result in first.items():
        assert result.samples == 0, name
        assert json.loads((tmp_path / name / "index.json").read_text()) == EMPTY_INDEX, name
    spark.sql(f"INSERT INTO {table_name} VALUES (3, 'c', 3.0), (4, 'd', 4.0)")
    followed.catch_up()
    spark.sql(f"DELETE FROM {table_name}")
    followed.catch_up()  # the mirrors are empty again, the append datasets keep what they appended
    spark.sql(f"INSERT INTO {table_name} VALUES (5, 'e', 5.0)")
    followed.catch_up()
