"""Training straight from a table Delta Lake wrote: a `StreamingDataset` whose remote is the table's folder.

The table is written through Spark SQL by Delta Lake itself, with column mapping (a column renamed after the first
writes), deletion vectors (a DELETE and an UPDATE that keep their files) and several data files. Spark's reader is
the oracle of the rows (the pinned version read by name, ``VERSION AS OF``) and ``dataframe_to_mds`` of the sample
types (each sample equals the same row converted by the Spark path and read back); the stream must give the same
order on a re-run, resume mid-epoch on another world size with exactly the rest of the epoch, keep reading its
pinned version after the table moved on, and mix with an MDS stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.delta_lake.followed import latest_version, table_location
from tests.delta_lake.stream_checks import CHECKPOINT_AT, check_order_resumption_and_mixing

pytestmark = pytest.mark.timeout(1800)


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        return isinstance(left, np.ndarray) and isinstance(right, np.ndarray) and np.array_equal(left, right)
    return type(left) is type(right) and left == right


def test_a_dataset_streams_a_delta_lake_table_without_a_copy(delta_spark, table_name, tmp_path):
    from streaming import LocalDataset, StreamingDataset
    from streaming.spark import dataframe_to_mds

    spark = delta_spark
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, label STRING, score DOUBLE, tags ARRAY<INT>) USING delta "
        f"TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.enableDeletionVectors' = 'true', "
        f"'delta.minReaderVersion' = '3', 'delta.minWriterVersion' = '7')"
    )
    for start in (0, 300, 600):
        spark.sql(
            f"INSERT INTO {table_name} SELECT /*+ REPARTITION(2) */ id, concat('l', CAST(id AS STRING)), id / 4.0, "
            f"array(CAST(id AS INT), 1) FROM range({start}, {start + 300})"
        )
    spark.sql(f"ALTER TABLE {table_name} RENAME COLUMN label TO name")
    spark.sql(f"DELETE FROM {table_name} WHERE id % 7 = 3")
    spark.sql(f"UPDATE {table_name} SET name = NULL WHERE id % 11 = 0")
    path = table_location(spark, table_name)
    pinned = latest_version(spark, table_name)
    files = spark.sql(f"DESCRIBE DETAIL {table_name}").collect()[0]["numFiles"]
    assert files >= 6
    live = {row["id"] for row in spark.sql(f"SELECT id FROM {table_name}").collect()}

    def make(cache: str, **kwargs: Any) -> StreamingDataset:
        return StreamingDataset(
            remote=path, local=str(tmp_path / cache), batch_size=8, shuffle=True, num_canonical_nodes=2, **kwargs
        )

    dataset = make("a")
    assert dataset.streams[0].version == pinned and dataset.shards_per_stream.tolist() == [files]
    # Exactly the pinned version's rows: every sample once by index, and an epoch (which pads the samples to
    # divide among the 2 canonical nodes, as with any stream) covers them all.
    assert sorted(int(dataset[i]["id"]) for i in range(dataset.num_samples)) == sorted(live)
    samples = list(dataset)
    assert {int(s["id"]) for s in samples} == live and len(samples) - len(live) < 2
    # Typed as the Spark path types the same table: every sample is the row converted and read back.
    dataframe_to_mds(spark.read.table(table_name), str(tmp_path / "mds"), spark=spark, progress=False)
    converted = {int(s["id"]): s for s in LocalDataset(str(tmp_path / "mds"))}
    for sample in samples:
        expected = converted[int(sample["id"])]
        assert set(sample) == set(expected) == {"id", "name", "score", "tags"}
        assert all(_same(sample[key], expected[key]) for key in expected), (sample, expected)

    # The same order on a re-run, resumption on another world size after the table moved on, and mixing.
    check_order_resumption_and_mixing(
        make,
        path,
        [int(s["id"]) for s in samples],
        dataset.state_dict(CHECKPOINT_AT, True),
        pinned,
        lambda late: spark.sql(f"INSERT INTO {table_name} VALUES ({late}, 'late', 1.0, array(1))"),
        live,
        tmp_path,
    )
