"""Issue 34, attack 1 on Spark's side: a local Delta table whose tree holds a link is refused before Spark reads it.

Spark's JVM opens a table's files by path and follows links, so a data file another user (a real second uid)
replaced by a link to the victim's private Parquet file would be copied into the output. `dataframe_to_mds` of a
table's path and the incremental job's Spark reader now list the table folder by folder without following a
link and refuse it, naming the link. (A link planted after that listing is Spark's to follow: docs/security.md.)
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from streaming.spark import dataframe_to_mds
from streaming.spark.table_changes import SparkChoice
from streaming.storage.url import UnsafePathError
from tests.security.conftest import as_other_user, share_tree, shared_dir


def _table_with_a_link(tmp_path) -> tuple[str, str]:
    from deltalake import DeltaTable, write_deltalake

    table = os.path.join(shared_dir(str(tmp_path / "shared")), "events")
    write_deltalake(table, pa.table({"text": ["the table's own rows"]}))
    [data] = [uri.removeprefix("file://") for uri in DeltaTable(table).file_uris()]
    private = str(tmp_path / "victim")
    os.makedirs(private, 0o700)
    secret = os.path.join(private, "secret.parquet")
    os.rename(data, secret)
    share_tree(table)
    as_other_user(lambda: os.symlink(secret, data))
    return table, data


def test_dataframe_to_mds_of_a_path_refuses_a_table_holding_a_link(spark, tmp_path):
    table, data = _table_with_a_link(tmp_path)
    out = str(tmp_path / "shared" / "out")
    with pytest.raises(UnsafePathError, match=os.path.basename(data)):
        dataframe_to_mds(table, out, spark=spark, progress=False)
    assert not os.path.exists(os.path.join(out, "index.json"))


def test_the_jobs_spark_reader_refuses_a_table_holding_a_link(spark, tmp_path):
    table, data = _table_with_a_link(tmp_path)
    with pytest.raises(UnsafePathError, match=os.path.basename(data)):
        SparkChoice(spark).open(table, None)
