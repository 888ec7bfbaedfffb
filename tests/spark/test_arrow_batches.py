"""Each Arrow batch a conversion's task holds is bounded by bytes, not only rows (`streaming.spark.arrow_batches`).

Wide rows (8 MiB and 20 MiB binaries) on both session kinds: the batches Spark hands a task under the conversion's
settings stay within `BATCH_BYTES` (plus one row), where a session without a byte bound of its own gives one batch
of every row; the settings are the session's again afterwards; and a conversion of 20 MiB rows reads back whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest

from streaming.spark import dataframe_to_mds
from streaming.spark.arrow_batches import BATCH_BYTES, MAX_BYTES_CONF, MAX_RECORDS_CONF, bounded_batches, slices
from tests.spark.helpers import read_samples

pytestmark = pytest.mark.spark
MIB = 1024 * 1024


def batch_sizes_task() -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A task reporting the rows and Arrow bytes of every batch Spark handed it.

    Made inside a function so that it is pickled by value: a Connect server's Python workers, like a cluster's behind
    a laptop, cannot import this test module.
    """

    def batch_sizes(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield pa.RecordBatch.from_pylist([{"rows": batch.num_rows, "bytes": batch.nbytes}])

    return batch_sizes


def wide_rows(session, rows: int, size: int):
    """`rows` rows of `size` bytes each, in one partition."""
    return session.range(0, rows, 1, 1).selectExpr(
        "id", f"CAST(repeat(CAST(id % 10 AS STRING), {size}) AS BINARY) AS blob"
    )


def test_slices_cut_a_batch_by_bytes_without_copying():
    batch = pa.RecordBatch.from_arrays([pa.array([bytes([i]) * MIB for i in range(10)])], names=["blob"])
    parts = list(slices(iter([batch]), 3 * MIB))
    assert [part.num_rows for part in parts] == [2, 2, 2, 2, 2]
    assert all(part.nbytes <= 3 * MIB for part in parts)
    assert pa.Table.from_batches(parts).column("blob").to_pylist() == batch.column("blob").to_pylist()
    assert parts[1].column(0).buffers()[2].address == batch.column(0).buffers()[2].address  # a view, not a copy
    one = pa.RecordBatch.from_arrays([pa.array([b"x" * (4 * MIB)])], names=["blob"])
    assert list(slices(iter([one]), MIB)) == [one]  # a row larger than the bound is still one slice


def test_spark_batches_are_bounded_by_bytes(session):
    frame = wide_rows(session, 16, 8 * MIB)  # 128 MiB in one partition; the suite's row bound is 64
    # No byte bound of the session's own, as on Spark 3.5 (pyspark 4.3 cuts at 64 MiB unless told otherwise) or on a
    # cluster whose configuration raises it.
    session.conf.set(MAX_BYTES_CONF, str(2**31 - 2))
    try:
        unbounded = frame.mapInArrow(batch_sizes_task(), "rows LONG, bytes LONG").collect()
        assert [row["rows"] for row in unbounded] == [16]
        before = {key: session.conf.get(key, None) for key in (MAX_BYTES_CONF, MAX_RECORDS_CONF)}
        with bounded_batches(frame) as applied:
            bounded = frame.mapInArrow(batch_sizes_task(), "rows LONG, bytes LONG").collect()
        assert MAX_BYTES_CONF in applied
        assert sum(row["rows"] for row in bounded) == 16 and len(bounded) >= 2
        assert max(row["bytes"] for row in bounded) <= BATCH_BYTES + 8 * MIB + MIB
        assert {key: session.conf.get(key, None) for key in before} == before
    finally:
        session.conf.unset(MAX_BYTES_CONF)


def test_rows_wider_than_the_bound_convert(session, tmp_path):
    out = str(tmp_path / "wide")
    result = dataframe_to_mds(wide_rows(session, 6, 20 * MIB), out, progress=False, compression=None)
    assert result.samples == 6
    samples = sorted(read_samples(out), key=lambda sample: int(sample["id"]))
    assert [len(sample["blob"]) for sample in samples] == [20 * MIB] * 6
    assert samples[3]["blob"][:3] == b"333"
