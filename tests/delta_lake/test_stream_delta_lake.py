"""A `StreamingDataset` over a table Delta Lake wrote, given by its name, on a classic session and over Spark Connect.

The table is written through Spark SQL by Delta Lake itself: partitioned, column mapping by name (a column renamed
after the first writes), deletion vectors made by a MERGE (updating, deleting and inserting rows) and a DELETE, and
several appends of several files each. The stream's remote is the table's name, which the active session resolves
to the table's folder (``DESCRIBE DETAIL``). Spark's reader of the pinned version (``VERSION AS OF``) is the oracle
of the rows; each sample must hold the row's values typed as the conversion types them (``int64``, ``float64``,
``str``, NULL as None). The stream must give the same order on a re-run, resume mid-epoch on another world size
with exactly the rest of the epoch (its pinned version, though the table moved on), and mix with an MDS stream.
A view or a table of another format given by name is refused, naming it.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from tests.delta_lake.followed import latest_version, table_location
from tests.delta_lake.stream_checks import CHECKPOINT_AT, check_order_resumption_and_mixing

pytestmark = pytest.mark.timeout(1800)

COLUMNS = ("id", "title", "score", "part")


def _typed(value: Any, kind: type) -> Any:
    """A Spark value as a sample holds it (None stays None)."""
    return None if value is None else kind(value)


def _expected(rows: list[Any]) -> dict[int, dict[str, Any]]:
    kinds = {"id": np.int64, "title": str, "score": np.float64, "part": str}
    return {int(row["id"]): {name: _typed(row[name], kinds[name]) for name in COLUMNS} for row in rows}


def _same(sample: dict[str, Any], expected: dict[str, Any]) -> bool:
    return set(sample) == set(expected) and all(
        type(sample[name]) is type(expected[name]) and sample[name] == expected[name] for name in expected
    )


def test_a_dataset_streams_a_delta_lake_table_given_by_its_name(delta_session, table_name, tmp_path):
    from streaming import StreamingDataset

    spark = delta_session
    spark.sql(
        f"CREATE TABLE {table_name} (id BIGINT, label STRING, score DOUBLE, part STRING) USING delta "
        f"PARTITIONED BY (part) TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        f"'delta.enableDeletionVectors' = 'true', 'delta.minReaderVersion' = '3', 'delta.minWriterVersion' = '7')"
    )
    for start in (0, 200, 400):
        spark.sql(
            f"INSERT INTO {table_name} SELECT /*+ REPARTITION(2) */ id, concat('l', CAST(id AS STRING)), id / 4.0, "
            f"concat('p', CAST(id % 2 AS STRING)) FROM range({start}, {start + 200})"
        )
    spark.sql(f"ALTER TABLE {table_name} RENAME COLUMN label TO title")
    spark.sql(
        f"MERGE INTO {table_name} AS t USING (SELECT id, id % 3 AS kind FROM range(150, 750)) AS s ON t.id = s.id "
        f"WHEN MATCHED AND s.kind = 0 THEN DELETE "
        f"WHEN MATCHED AND s.kind = 1 THEN UPDATE SET title = NULL, score = -t.score "
        f"WHEN NOT MATCHED THEN INSERT (id, title, score, part) VALUES (s.id, 'new', 0.5, 'p9')"
    )
    spark.sql(f"DELETE FROM {table_name} WHERE id % 13 = 5")
    pinned = latest_version(spark, table_name)
    detail = spark.sql(f"DESCRIBE DETAIL {table_name}").collect()[0]
    files = int(detail["numFiles"])
    assert files >= 6
    history = spark.sql(f"DESCRIBE HISTORY {table_name}").collect()
    merge = next(row for row in history if row["operation"] == "MERGE")
    assert int(merge["operationMetrics"]["numTargetDeletionVectorsAdded"]) > 0  # rows deleted in place
    expected = _expected(spark.sql(f"SELECT * FROM {table_name} VERSION AS OF {pinned}").collect())

    def make(cache: str, **kwargs: Any) -> StreamingDataset:
        return StreamingDataset(
            remote=table_name, local=str(tmp_path / cache), batch_size=8, shuffle=True, num_canonical_nodes=2, **kwargs
        )

    dataset = make("a")
    stream = dataset.streams[0]
    assert stream.remote == table_location(spark, table_name) and stream.version == pinned
    assert dataset.shards_per_stream.tolist() == [files]
    # Exactly the pinned version's rows, each typed as the conversion types it; an epoch (padded to divide among
    # the 2 canonical nodes, as with any stream) covers them all.
    by_index = [dataset[i] for i in range(dataset.num_samples)]
    assert sorted(int(s["id"]) for s in by_index) == sorted(expected)
    wrong = [(s, expected[int(s["id"])]) for s in by_index if not _same(s, expected[int(s["id"])])]
    assert not wrong, wrong[:3]
    samples = list(dataset)
    assert {int(s["id"]) for s in samples} == set(expected) and len(samples) - len(expected) < 2

    # The same order on a re-run, resumption on another world size after the table moved on, and mixing.
    check_order_resumption_and_mixing(
        make,
        table_name,
        [int(s["id"]) for s in samples],
        dataset.state_dict(CHECKPOINT_AT, True),
        pinned,
        lambda late: spark.sql(f"INSERT INTO {table_name} VALUES ({late}, 'late', 1.0, 'p0')"),
        set(expected),
        tmp_path,
    )


def test_a_view_or_a_table_of_another_format_is_refused_by_name(delta_session, table_name, tmp_path):
    from streaming import StreamingDataset
    from streaming.dataset.delta_table_name import TableNameError

    spark = delta_session
    spark.sql(f"CREATE TABLE {table_name} USING delta AS SELECT id FROM range(10)")
    view, plain = f"{table_name}_view", f"{table_name}_parquet"
    spark.sql(f"CREATE VIEW {view} AS SELECT id FROM {table_name}")
    spark.sql(f"CREATE TABLE {plain} USING parquet AS SELECT id FROM range(10)")
    with pytest.raises(TableNameError, match=f"{view.split('.')[1]}.* is a view"):
        StreamingDataset(remote=view, local=str(tmp_path / "v"), batch_size=4)
    with pytest.raises(TableNameError, match=f"{plain.split('.')[1]}.* not a Delta table"):
        StreamingDataset(remote=plain, local=str(tmp_path / "p"), batch_size=4)
    with pytest.raises(TableNameError, match="no table of that name"):
        StreamingDataset(remote=f"{table_name}_missing", local=str(tmp_path / "m"), batch_size=4)
    # Backquoted parts name the same table; a version of it is pinned by name, as of a table's folder.
    spark.sql(f"INSERT INTO {table_name} VALUES (10)")
    schema, name = table_name.split(".")
    dataset = StreamingDataset(remote=f"`{schema}`.`{name}`", local=str(tmp_path / "q"), batch_size=4)
    assert dataset.streams[0].version == 1 and sorted(int(s["id"]) for s in dataset) == list(range(11))
    dataset = StreamingDataset(
        remote=table_name, local=str(tmp_path / "v0"), batch_size=4, stream_name="delta", stream_config={"version": 0}
    )
    assert sorted(int(s["id"]) for s in dataset) == list(range(10))


def test_a_folder_spark_wrote_as_parquet_streams_its_rows(delta_session, tmp_path):
    from streaming import StreamingDataset
    from streaming.dataset.parquet_stream import ParquetStream

    spark = delta_session
    folder = str(tmp_path / "folder")
    for start in (0, 300):
        frame = spark.sql(
            f"SELECT /*+ REPARTITION(2) */ id, IF(id % 5 = 0, NULL, concat('t', CAST(id AS STRING))) AS title, "
            f"id / 4.0 AS score, concat('p', CAST(id % 2 AS STRING)) AS part, CAST(id % 3 AS INT) AS bucket "
            f"FROM range({start}, {start + 300})"
        )
        frame.write.mode("append").partitionBy("part", "bucket").parquet(folder)
    assert os.path.exists(os.path.join(folder, "_SUCCESS"))
    rows = spark.read.parquet(folder).collect()
    expected = {int(row["id"]): (row["title"], float(row["score"]), row["part"], int(row["bucket"])) for row in rows}
    dataset = StreamingDataset(remote=folder, local=str(tmp_path / "c"), batch_size=8, shuffle=True)
    assert type(dataset.streams[0]) is ParquetStream and dataset.shards_per_stream.tolist()[0] >= 12
    got, order = {}, []
    for sample in dataset:
        order.append(int(sample["id"]))
        assert type(sample["id"]) is np.int64 and type(sample["bucket"]) is np.int64
        assert sample["title"] is None or type(sample["title"]) is str
        got[int(sample["id"])] = (sample["title"], float(sample["score"]), sample["part"], int(sample["bucket"]))
    assert got == expected
    rerun = StreamingDataset(remote=folder, local=str(tmp_path / "c2"), batch_size=8, shuffle=True)
    assert [int(s["id"]) for s in rerun] == order
