"""Training straight from a table Delta Lake wrote: a `StreamingDataset` whose remote is the table's folder.

The table is written through Spark SQL by Delta Lake itself, with column mapping (a column renamed after the first
writes), deletion vectors (a DELETE and an UPDATE that keep their files) and several data files. Spark's reader is
the oracle of the rows (the pinned version read by name, ``VERSION AS OF``) and ``dataframe_to_mds`` of the sample
types (each sample equals the same row converted by the Spark path and read back); the stream must give the same
order on a re-run, resume mid-epoch on another world size with exactly the rest of the epoch, keep reading its
pinned version after the table moved on, and mix with an MDS stream.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.delta_lake.followed import latest_version, table_location
from tests.helpers import as_rank

pytestmark = pytest.mark.timeout(1800)


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        return isinstance(left, np.ndarray) and isinstance(right, np.ndarray) and np.array_equal(left, right)
    return type(left) is type(right) and left == right


def test_a_dataset_streams_a_delta_lake_table_without_a_copy(delta_spark, table_name, tmp_path):
    from streaming import LocalDataset, MDSWriter, Stream, StreamingDataset
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

    # The same order on a re-run; one rank's checkpoint resumed by two ranks yields exactly the rest.
    first = [int(s["id"]) for s in samples]
    assert [int(s["id"]) for s in make("b")] == first
    state = json.loads(json.dumps({**dataset.state_dict(150, True), "epoch": 0}))
    spark.sql(f"INSERT INTO {table_name} VALUES (5000, 'late', 1.0, array(1))")  # the table moves on
    rest = []
    for rank in range(2):
        with as_rank(rank, 2):
            resumed = make(f"r{rank}")
            assert resumed.streams[0].version == pinned + 1
            resumed.load_state_dict(state)
            assert resumed.streams[0].version == pinned
            rest.extend(int(s["id"]) for s in resumed)
    # Every sample of the epoch is read once across the two runs, but for the padding the world size decides.
    assert set(first[:150]) | set(rest) == set(first) and abs(150 + len(rest) - len(first)) < 2 * 8

    # Mixed with an MDS stream.
    with MDSWriter(out=str(tmp_path / "other"), columns={"id": "int64"}) as writer:
        for i in range(100):
            writer.write({"id": 10_000 + i})
    mixed = StreamingDataset(
        streams=[
            Stream(remote=path, local=str(tmp_path / "m1"), proportion=1),
            Stream(remote=str(tmp_path / "other"), local=str(tmp_path / "m2"), proportion=1),
        ],
        batch_size=8,
        epoch_size=200,
    )
    ids = [int(s["id"]) for s in mixed]
    assert len(ids) == 200 and sum(i >= 10_000 for i in ids) == 100 and set(ids) - set(range(10_000, 10_100)) <= live
