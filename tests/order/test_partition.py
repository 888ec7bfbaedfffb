"""Partitioning against MosaicML Streaming's vectors, plus argument checks."""

import json
from pathlib import Path

import numpy as np
import pytest

from streaming.dataset.partition import default_num_canonical_nodes, get_partitions, get_partitions_relaxed

CASES = json.loads((Path(__file__).parents[1] / "fixtures/orders/partition.json").read_text())["cases"]
ARGS = (
    "algo",
    "num_samples",
    "num_canonical_nodes",
    "num_physical_nodes",
    "ranks_per_node",
    "workers_per_rank",
    "batch_size",
    "drop_first",
    "initial_physical_nodes",
)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['algo']}" for i, c in enumerate(CASES)])
def test_partition_vectors(case):
    args = [case[name] for name in ARGS]
    if "error" in case:
        with pytest.raises(Exception) as raised:
            get_partitions(*args)
        assert type(raised.value).__name__ == case["error"]
    else:
        ids = get_partitions(*args)
        assert ids.dtype == np.int64
        assert ids.tolist() == case["ids"]


@pytest.mark.parametrize("algo", ["orig", "relaxed"])
def test_every_sample_appears_once_when_sizes_divide(algo):
    ids = get_partitions(algo, 48, 4, 2, 2, 3, 2)
    assert ids.shape == (2, 2, 3, 2, 2)
    assert sorted(ids.reshape(-1).tolist()) == list(range(48))


def test_global_order_is_independent_of_the_world():
    def global_batches(nodes, ranks, workers, batch):
        ids = get_partitions("orig", 96, 4, nodes, ranks, workers, batch)
        return [sorted(b) for b in ids.transpose(3, 2, 0, 1, 4).reshape(-1, 8).tolist()]

    assert global_batches(1, 2, 1, 4) == global_batches(2, 2, 2, 2) == global_batches(4, 1, 4, 2)


def test_resuming_drops_what_was_seen():
    full = get_partitions("orig", 40, 2, 1, 2, 1, 2)
    resumed = get_partitions("orig", 40, 2, 1, 2, 1, 2, drop_first=12)
    seen = full.transpose(3, 2, 0, 1, 4).reshape(-1)[:12]
    rest = resumed.transpose(3, 2, 0, 1, 4).reshape(-1)
    assert sorted(seen.tolist() + rest[rest >= 0].tolist()) == list(range(40))


def test_dropping_everything_leaves_empty_batches():
    ids = get_partitions("relaxed", 10, 2, 2, 2, 2, 3, drop_first=12)
    assert ids.shape == (2, 2, 2, 0, 3)


def test_resuming_past_the_end_is_rejected():
    with pytest.raises(ValueError, match=r"Resuming further into the dataset \(13\)"):
        get_partitions("orig", 10, 2, 2, 2, 1, 1, drop_first=13)


def test_node_counts_must_divide_one_another():
    with pytest.raises(
        ValueError,
        match=r"^Either canonical or physical nodes must be evenly divisible.*canonical_nodes=3, num_physical_nodes=2",
    ):
        get_partitions("orig", 100, 3, 2, 1, 1, 1)


def test_relaxed_resumes_on_an_incompatible_node_count():
    ids = get_partitions_relaxed(120, 3, 2, 2, 1, 3, 0, initial_physical_nodes=3)
    assert ids.shape[:3] == (2, 2, 1)
    assert sorted(ids[ids >= 0].tolist()) == list(range(120))


def test_relaxed_needs_a_compatible_global_batch():
    with pytest.raises(ValueError, match="global batch size"):
        get_partitions_relaxed(120, 3, 2, 2, 1, 1, 0, initial_physical_nodes=3)


def test_unknown_algo_lists_the_choices():
    with pytest.raises(ValueError, match=r"Unknown partition_algo 'pynum'.*'orig', 'relaxed'"):
        get_partitions("pynum", 10, 1, 1, 1, 1, 1)


def test_empty_epoch_is_rejected():
    with pytest.raises(ValueError, match="epoch of 0 samples"):
        get_partitions("orig", 0, 1, 1, 1, 1, 1)


def test_default_num_canonical_nodes():
    assert default_num_canonical_nodes("py1e", 3) == 3
    assert default_num_canonical_nodes("py1s", 2) == 128
    assert default_num_canonical_nodes("py2s", 1) == 64
