"""`WorkerShare` and `first_needs`: a worker's share of the plan, located a chunk at a time, is exactly the share
located at once, whatever the read sizes, the padding and the chunk boundaries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming import MDSWriter, StreamingDataset
from streaming.dataset.share import CHUNK_SAMPLES, WorkerShare, first_needs


def _located_at_once(ids: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    kept = ids[ids >= 0]
    shards = np.searchsorted(starts, kept, "right") - 1
    return shards, kept - starts[shards]


@pytest.fixture
def plan_file(tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A mapped share of 2.5 chunks with padding scattered through it and at its end, over uneven shards."""
    rng = np.random.default_rng(7)
    shard_sizes = rng.integers(1, 500, 2_000)
    starts = np.concatenate([[0], np.cumsum(shard_sizes)[:-1]]).astype(np.int64)
    length = CHUNK_SAMPLES * 5 // 2
    ids = rng.integers(0, int(shard_sizes.sum()), length)
    ids[rng.random(length) < 0.01] = -1
    ids[-1000:] = -1
    path = tmp_path / "plan.npy"
    np.save(path, ids)
    return np.load(path, mmap_mode="r"), starts


@pytest.mark.parametrize("count", [1, 32, 1000, CHUNK_SAMPLES, CHUNK_SAMPLES * 3])
def test_reads_of_any_size_give_the_share_located_at_once(plan_file, count):
    ids, starts = plan_file
    expected_shards, expected_indices = _located_at_once(np.asarray(ids), starts)
    parts = list(WorkerShare(ids, starts).chunks(count))
    assert all(len(shards) == count for shards, _ in parts[:-1])
    np.testing.assert_array_equal(np.concatenate([shards for shards, _ in parts]), expected_shards)
    np.testing.assert_array_equal(np.concatenate([indices for _, indices in parts]), expected_indices)


def test_has_more_is_false_when_only_padding_is_left(plan_file):
    ids, starts = plan_file
    share = WorkerShare(ids, starts)
    total = len(_located_at_once(np.asarray(ids), starts)[0])
    share.take(total - 1)
    assert share.has_more()
    assert len(share.take(5)[0]) == 1
    assert not share.has_more()
    assert len(share.take(5)[0]) == 0


def test_first_needs_names_each_shard_at_its_first_position(plan_file):
    ids, starts = plan_file
    shards, _ = _located_at_once(np.asarray(ids), starts)
    unique, first = np.unique(shards, return_index=True)
    assert first_needs(ids, starts) == sorted(zip(first.tolist(), unique.tolist()))


def test_batch_reads_take_only_the_reads_they_need(tmp_path):
    """A finite ``batches_per_read`` that covers the epoch exactly is not read past its end (the last read is
    followed by padding alone)."""
    with MDSWriter(out=str(tmp_path / "ds"), columns={"x": "int"}, size_limit=1 << 12) as writer:
        for value in range(100):
            writer.write({"x": value})
    dataset = StreamingDataset(local=str(tmp_path / "ds"), batch_size=8)
    # Each read is consumed before the next is taken, as the API asks.
    counts, values = [], []
    for read in dataset.iter_batch_reads(batches_per_read=[5, 5, 3], drop_last=True):
        counts.append(read.count)
        values.extend(np.asarray(read.columns()["x"]).tolist())
    assert counts == [40, 40, 16]
    assert values == list(range(96))
