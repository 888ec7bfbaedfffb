"""The golden vectors of upstream-behaviour.md §5.12 (real MosaicML Streaming 0.13.0 output)."""

import pytest

from streaming.dataset.batching import PlanInputs, generate_work
from streaming.dataset.partition import get_partitions
from streaming.dataset.sampling import get_sampling
from streaming.dataset.shuffle import default_shuffle_block_size, get_shuffle
from streaming.dataset.world import World

SHUFFLES = {
    "naive": (
        [7, 2, 8, 10, 0, 6, 5, 20, 22, 17, 1, 11, 9, 19, 21, 18, 13, 14, 23, 15, 12, 3, 16, 4],
        [11, 13, 15, 7, 3, 19, 2, 18, 20, 1, 22, 9, 12, 4, 16, 8, 10, 21, 6, 5, 14, 17, 23, 0],
    ),
    "py1s": (
        [15, 16, 5, 6, 7, 8, 10, 11, 9, 12, 14, 13, 2, 1, 0, 3, 4, 22, 19, 17, 23, 21, 18, 20],
        [5, 8, 9, 7, 6, 10, 11, 15, 16, 13, 12, 14, 23, 20, 17, 18, 22, 21, 19, 4, 1, 3, 2, 0],
    ),
    "py2s": (
        [17, 15, 5, 10, 7, 9, 6, 11, 8, 13, 14, 12, 16, 20, 21, 23, 22, 18, 19, 0, 4, 1, 3, 2],
        [7, 8, 11, 5, 9, 6, 10, 15, 17, 14, 13, 12, 1, 4, 2, 3, 0, 18, 19, 22, 20, 16, 21, 23],
    ),
    "py1br": (
        [5, 8, 15, 6, 10, 16, 9, 7, 13, 11, 12, 14, 17, 2, 18, 1, 0, 3, 22, 20, 21, 19, 4, 23],
        [9, 5, 6, 10, 8, 7, 13, 14, 16, 15, 11, 12, 17, 21, 18, 20, 23, 19, 22, 0, 1, 4, 3, 2],
    ),
    "py1e": (
        [15, 5, 16, 6, 7, 8, 10, 11, 12, 9, 14, 13, 2, 0, 4, 1, 21, 3, 19, 17, 23, 20, 22, 18],
        [5, 8, 9, 7, 6, 15, 10, 11, 13, 12, 16, 14, 23, 21, 17, 22, 20, 19, 0, 18, 3, 4, 2, 1],
    ),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("algo", sorted(SHUFFLES))
@pytest.mark.parametrize("epoch", [0, 1])
def test_shuffle_table(algo, epoch):
    assert get_shuffle(algo, [5, 7, 3, 9], 2, 9176, epoch, 8).tolist() == SHUFFLES[algo][epoch]


@pytest.mark.parametrize(
    "args,expected",
    [
        (
            ("orig", 10, 2, 1, 2, 2, 2),
            [[[[[0, 1], [4, -1]], [[2, 3], [-1, -1]]], [[[5, 6], [9, -1]], [[7, 8], [-1, -1]]]]],
        ),
        (("orig", 10, 2, 1, 2, 2, 2, 3), [[[[[6, 7]], [[8, 9]]], [[[2, 3]], [[4, 4]]]]]),
        (("orig", 10, 2, 2, 1, 1, 2), [[[[[0, 1], [2, 3], [4, -1]]]], [[[[5, 6], [7, 8], [9, -1]]]]]),
        (
            ("relaxed", 12, 3, 1, 2, 1, 4, 0, 2),
            [[[[[0, 8, 5, 2], [10, 7, -1, -1]]], [[[4, 1, 9, 6], [3, 11, -1, -1]]]]],
        ),
    ],
)
def test_partitions(args, expected):
    assert get_partitions(*args).tolist() == expected


def test_sampling():
    assert get_sampling([5, 7, 3, 9], 30, 2, 9176, 0, True).tolist() == [6, 10, 3, 11]
    assert get_sampling([5, 7, 3, 9], 10, 1, 9176, 0, True).tolist() == [2, 5, 0, 3]


def _plan(num_canonical_nodes, **settings):
    """24 samples in 3 shards of 8, batch size 2, shuffled with the defaults unless overridden."""
    settings.setdefault("shuffle_block_size", default_shuffle_block_size(num_canonical_nodes))
    return PlanInputs([8, 8, 8], [3], [24], [1.0], 24, 2, num_canonical_nodes, shuffle=True, **settings)


def _single_process_order(plan, epoch, sample_in_epoch=0):
    ids = generate_work("random", plan, World(1, 1, 1, 0), epoch, sample_in_epoch).reshape(-1)
    return ids[ids >= 0].tolist()


EPOCH_0 = [1, 22, 2, 10, 20, 14, 0, 8, 23, 18, 21, 11, 15, 5, 16, 3, 13, 6, 9, 4, 7, 12, 19, 17]
EPOCH_1 = [8, 7, 21, 6, 10, 4, 14, 0, 18, 12, 17, 20, 11, 5, 16, 23, 15, 13, 3, 2, 22, 1, 19, 9]


def test_default_shuffle_epochs_and_resume():
    plan = _plan(1)
    assert _single_process_order(plan, 0) == EPOCH_0
    assert _single_process_order(plan, 1) == EPOCH_1
    assert _single_process_order(plan, 0, sample_in_epoch=10) == EPOCH_0[10:]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_other_settings():
    assert _single_process_order(_plan(2, shuffle_block_size=8), 0) == [
        9,
        14,
        10,
        12,
        18,
        15,
        8,
        1,
        11,
        13,
        21,
        2,
        16,
        6,
        19,
        0,
        22,
        4,
        17,
        7,
        20,
        3,
        23,
        5,
    ]
    assert _single_process_order(_plan(1, shuffle_seed=1, shuffle_algo="py1br", shuffle_block_size=8), 0) == [
        2,
        3,
        5,
        4,
        0,
        1,
        6,
        7,
        14,
        12,
        11,
        13,
        10,
        8,
        9,
        23,
        18,
        16,
        21,
        20,
        22,
        15,
        17,
        19,
    ]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_more_canonical_nodes_than_samples_repeats_samples():
    assert len(_single_process_order(_plan(64, shuffle_algo="py1s"), 0)) == 64


def test_generate_work_one_node_two_ranks():
    work = generate_work("random", _plan(2), World(1, 2, 1, 0), 0, 0)
    assert work[0, 0, 0].tolist() == [[18, 21], [16, 19], [8, 20], [10, 22], [9, 17], [23, 11]]
    assert work[0, 1, 0].tolist() == [[14, 1], [0, 6], [2, 12], [3, 5], [4, 13], [7, 15]]


def test_generate_work_one_rank_has_the_same_global_batches():
    single = generate_work("random", _plan(2), World(1, 1, 1, 0), 0, 0).reshape(-1, 2)
    assert single[:3].tolist() == [[18, 14], [21, 1], [16, 0]]
    two_ranks = generate_work("random", _plan(2), World(1, 2, 1, 0), 0, 0)
    global_batches = two_ranks.transpose(3, 2, 0, 1, 4).reshape(-1, 4)
    assert [sorted(b) for b in global_batches.tolist()] == [sorted(b) for b in single.reshape(-1, 4).tolist()]
