"""Per-shard sampling against MosaicML Streaming's vectors, plus argument checks."""

import json
from pathlib import Path

import pytest

from streaming.dataset.sampling import get_sampling

CASES = json.loads((Path(__file__).parents[1] / "fixtures/orders/sampling.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_sampling_vectors(case):
    result = get_sampling(
        case["samples_per_shard"], case["choose"], case["granularity"], case["seed"], case["epoch"], case["use_epoch"]
    )
    assert result.tolist() == case["result"]


def test_whole_multiples_repeat_every_shard():
    assert get_sampling([3, 5, 2], 20, 4, 0, 0, True).tolist() == [6, 10, 4]


def test_fraction_is_drawn_in_picks_and_adds_up():
    result = get_sampling([10, 10, 10, 10], 14, 5, 3, 0, False)
    assert result.sum() == 14
    assert all(count % 5 == 0 or count == 14 % 5 for count in result.tolist())


def test_epoch_changes_picks_only_with_use_epoch():
    sizes = list(range(1, 40))
    fixed = {tuple(get_sampling(sizes, 300, 1, 9, epoch, False).tolist()) for epoch in range(4)}
    moving = {tuple(get_sampling(sizes, 300, 1, 9, epoch, True).tolist()) for epoch in range(4)}
    assert len(fixed) == 1
    assert len(moving) > 1


def test_empty_shard_overwrites_the_previous_last_pick_as_upstream_does():
    # Shard 1 is empty: the last pick of shard 0 gets size `granularity` (2) instead of 1.
    assert get_sampling([3, 0, 4], 4, 2, 0, 0, False).sum() == 4
    assert get_sampling([3, 0], 2, 2, 0, 0, False).tolist() == [2, 0]


@pytest.mark.parametrize(
    "name,args",
    [
        ("choose", ([1], -1, 1, 0, 0, True)),
        ("granularity", ([1], 1, 0, 0, 0, True)),
        ("seed", ([1], 1, 1, -1, 0, True)),
        ("epoch", ([1], 1, 1, 0, -1, True)),
    ],
)
def test_invalid_arguments_are_named(name, args):
    with pytest.raises(ValueError, match=f"`{name}`"):
        get_sampling(*args)
