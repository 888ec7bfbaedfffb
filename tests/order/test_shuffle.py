"""Shuffle algorithms against MosaicML Streaming's vectors, plus their structural guarantees."""

import json
from pathlib import Path

import numpy as np
import pytest

from streaming.dataset.shuffle import default_shuffle_block_size, divide_spans, get_shuffle, shuffle_algos

CASES = json.loads((Path(__file__).parents[1] / "fixtures/orders/shuffle.json").read_text())["cases"]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['algo']}" for i, c in enumerate(CASES)])
def test_shuffle_vectors(case):
    args = (
        case["algo"],
        np.array(case["shard_sizes"]),
        case["num_canonical_nodes"],
        case["seed"],
        case["epoch"],
        case["block_size"],
    )
    if "error" in case:
        with pytest.raises(Exception) as raised:
            get_shuffle(*args)
        assert type(raised.value).__name__ == case["error"]
    else:
        ids = get_shuffle(*args)
        assert ids.dtype == np.int64
        assert ids.tolist() == case["ids"]


SIZES = [5, 0, 7, 3, 9, 0, 11, 1, 6]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("algo", sorted(shuffle_algos))
def test_every_algo_returns_a_permutation(algo):
    ids = get_shuffle(algo, SIZES, 3, 1234, 5, 6)
    assert sorted(ids.tolist()) == list(range(sum(SIZES)))


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("algo", ["py1br", "py1e", "py1s", "py2s"])
def test_canonical_node_sample_sets_are_fixed_across_epochs(algo):
    total, nodes = sum(SIZES), 4
    bounds = [total * c // nodes for c in range(nodes + 1)]
    epochs = [get_shuffle(algo, SIZES, nodes, 77, epoch, 6) for epoch in range(3)]
    for begin, end in zip(bounds, bounds[1:]):
        node_sets = {frozenset(ids[begin:end].tolist()) for ids in epochs}
        assert len(node_sets) == 1
    assert epochs[0].tolist() != epochs[1].tolist()


def test_py1s_keeps_each_shard_contiguous_within_a_node():
    ids = get_shuffle("py1s", [4, 4, 4], 1, 5, 0)
    shard_of_position = ids // 4
    assert len([k for k in range(1, 12) if shard_of_position[k] != shard_of_position[k - 1]]) == 2


def test_divide_spans_splits_at_node_boundaries():
    spans, parts = divide_spans([(10, 15), (0, 10), (15, 16)], 16, 4)
    assert spans == [(10, 14), (14, 15), (0, 3), (3, 7), (7, 10), (15, 16)]
    assert parts == [(0, 1), (1, 3), (3, 4), (4, 6)]


def _walk(spans, total, num_parts):
    """Sequential statement of the rule: fill part c up to total*(c+1)//num_parts."""
    pending, out, parts, filled = list(spans), [], [], 0
    for part in range(num_parts):
        end, first = total * (part + 1) // num_parts, len(out)
        while pending:
            begin, stop = pending[0]
            if filled + stop - begin <= end:
                out.append(pending.pop(0))
                filled += stop - begin
                continue
            if filled < end:
                out.append((begin, begin + end - filled))
                pending[0] = (begin + end - filled, stop)
                filled = end
            break
        parts.append((first, len(out)))
    return out, parts


@pytest.mark.parametrize("seed", range(20))
def test_divide_spans_matches_a_sequential_walk(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 6, rng.integers(1, 12))
    begins = np.cumsum(sizes) - sizes
    spans = [(int(b), int(b + s)) for b, s in zip(begins, sizes)]
    rng.shuffle(spans)
    num_parts = int(rng.integers(1, 9))
    assert divide_spans(spans, int(sizes.sum()), num_parts) == _walk(spans, int(sizes.sum()), num_parts)


def test_divide_spans_puts_empty_spans_in_the_first_node_ending_at_or_after_them():
    spans, parts = divide_spans([(0, 2), (2, 2), (2, 4)], 4, 2)
    assert spans == [(0, 2), (2, 2), (2, 4)]
    assert parts == [(0, 2), (2, 3)]


def test_py1e_rejects_a_canonical_node_without_samples():
    with pytest.raises(
        ValueError, match=r"^The number of samples assigned to a canonical node is 0\..*canonical node 0"
    ):
        get_shuffle("py1e", [2, 1], 4, 0, 0, 8)


def test_unknown_algo_lists_the_choices():
    with pytest.raises(ValueError, match=r"Unknown shuffle_algo 'py1b'.*'naive'"):
        get_shuffle("py1b", SIZES, 1, 0, 0)


def test_negative_sizes_are_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        get_shuffle("py1s", [3, -1], 1, 0, 0)


def test_default_block_size():
    assert default_shuffle_block_size(1) == 4_000_000
    assert default_shuffle_block_size(2) == 2_000_000
    assert default_shuffle_block_size(64) == 1 << 18
