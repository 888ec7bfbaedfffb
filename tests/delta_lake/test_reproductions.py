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

import pytest

from streaming import LocalDataset
from streaming.spark.incremental import incremental_to_mds

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


def _incremental(table: str, out: Path, *options: str) -> subprocess.CompletedProcess:
    done = _cli("incremental", table, str(out), *options)
    assert done.returncode == 0, done.stderr
    return done


def _mirror(spark: Any, name: str, out: Path, **options: Any) -> Any:
    return incremental_to_mds(name, str(out), mode="mirror", spark=spark, progress=False, **options)


# -- Spark's reader, a table by name ---------------------------------------------------------------------------


# -- delta-rs's reader, a path and the command line -------------------------------------------------------------


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
