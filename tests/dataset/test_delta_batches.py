"""The batch path over a Delta table (`streaming.dataset.delta_reader`, whose decoded row groups have their columns
read out once for batch reads) against the batch path over the table's MDS conversion, which reads the shards'
bytes: for the same samples, in any order, across files and row groups, the same columns (values, dtypes, NULLs).
"""

from __future__ import annotations

import decimal

import deltalake
import numpy as np
import pyarrow as pa

from streaming import StreamingDataset
from streaming.convert.arrow_engine import convert_files
from tests.helpers import assert_same_value

PER_APPEND = 90


def _rows(start: int) -> pa.Table:
    ids = list(range(start, start + PER_APPEND))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "small": pa.array([i % 100 for i in ids], pa.int16()),
            "x": pa.array([None if i % 11 == 0 else i / 7 for i in ids], pa.float64()),
            "name": pa.array([None if i % 9 == 0 else f"row {i} é" for i in ids], pa.string()),
            "blob": pa.array([bytes([i % 256]) * (i % 5) for i in ids], pa.binary()),
            "vec": pa.array([[float(i), -1.0, 0.5] for i in ids], pa.list_(pa.float32())),
            "ragged": pa.array([list(range(i % 4)) for i in ids], pa.list_(pa.int32())),
            "price": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(10, 2)),
        }
    )


def test_delta_batches_are_the_conversions_batches(tmp_path):
    table = str(tmp_path / "table")
    # Row groups of 32 rows: a file holds 3, and a batch's samples of one file come from several of them.
    properties = deltalake.WriterProperties(max_row_group_size=32)
    for append in range(4):
        deltalake.write_deltalake(table, _rows(append * PER_APPEND), mode="append", writer_properties=properties)
    # In the first two appends only: delta-rs rewrites the files a DELETE touches into one (of 162 rows).
    deltalake.DeltaTable(table).delete(f"id < {2 * PER_APPEND} AND id % 10 = 3", writer_properties=properties)
    converted = str(tmp_path / "mds")
    convert_files(table, converted, kind="delta")
    delta = StreamingDataset(remote=table, local=str(tmp_path / "cache"), batch_size=16, shuffle=True)
    mds = StreamingDataset(local=converted, batch_size=16)
    assert delta.num_samples == mds.num_samples == 4 * PER_APPEND - 18
    at = {int(mds[i]["id"]): i for i in range(mds.num_samples)}
    for shard in range(delta.num_shards):  # fetched first: a batch over files not yet local is read sample by sample
        delta.prepare_shard(shard)
    ids = np.random.default_rng(7).permutation(delta.num_samples)
    for cut in (ids[:40], ids[40:41], np.concatenate([ids[:5], ids[:5]]), ids):
        got = delta.get_batch(cut)
        expected = mds.get_batch([at[int(i)] for i in got["id"]])
        assert_same_value(got, expected, "batch")
        assert_same_value(delta.get_batch(cut), got, "again")  # the groups' read-out columns stay as they were
    # The two appends the DELETE left, and the file it rewrote them into (files in the order of their random names).
    groups = [delta.readers[shard].open().parquet.num_row_groups for shard in range(delta.num_shards)]
    assert sorted(groups) == [3, 3, 6]
    for batch in delta.iter_batches():
        assert_same_value(batch, mds.get_batch([at[int(i)] for i in batch["id"]]), "iterated")
    # Read out: numbers and fixed-shape arrays stacked, text and bytes, NULLs folded as in a per-sample read.
    batch = delta.get_batch(np.arange(delta.num_samples))
    assert batch["vec"].shape == (delta.num_samples, 3) and batch["small"].dtype == np.int16
    assert any(value is None for value in batch["name"]) and any(value is None for value in batch["x"])
