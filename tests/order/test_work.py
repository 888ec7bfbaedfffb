"""Whole-epoch plans (`generate_work`) against MosaicML Streaming's vectors; plan inputs."""

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from streaming.dataset.batching import PlanInputs, batching_methods, default_predownload, generate_work
from streaming.dataset.weighting import StreamWeight, resolve_weights
from streaming.dataset.world import World

CASES = json.loads((Path(__file__).parents[1] / "fixtures/orders/work.json").read_text())["cases"]
EPOCHS = [(i, epoch) for i, case in enumerate(CASES) for epoch in case["epochs"]]


def plan_for(case):
    kwargs = case["dataset_kwargs"]
    weights = [StreamWeight(**{k: v for k, v in stream.items() if k != "local"}) for stream in case["streams"]]
    shard_sizes = case["stream_shard_sizes"]
    resolved = resolve_weights(
        weights, [sum(sizes) for sizes in shard_sizes], kwargs.get("epoch_size"), kwargs["shuffle_seed"]
    )
    return PlanInputs(
        samples_per_shard=np.concatenate([np.array(sizes, np.int64) for sizes in shard_sizes]),
        shards_per_stream=[len(sizes) for sizes in shard_sizes],
        choose_per_stream=resolved.choose,
        proportion_per_stream=resolved.proportion,
        epoch_size=resolved.epoch_size,
        batch_size=kwargs["batch_size"],
        num_canonical_nodes=kwargs["num_canonical_nodes"],
        shuffle=kwargs["shuffle"],
        shuffle_algo=kwargs["shuffle_algo"],
        shuffle_seed=kwargs["shuffle_seed"],
        shuffle_block_size=kwargs["shuffle_block_size"],
        sampling_method=kwargs["sampling_method"],
        sampling_granularity=kwargs["sampling_granularity"],
        batching_method=kwargs["batching_method"],
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    "index,expected",
    EPOCHS,
    ids=[
        f"{i}-{CASES[i]['dataset_kwargs']['batching_method']}-e{e['epoch']}-s{e['sample_in_epoch']}" for i, e in EPOCHS
    ],
)
def test_work_vectors(index, expected):
    case = CASES[index]
    plan = plan_for(case)
    assert plan.epoch_size == case["epoch_size"]
    world = World(case["num_physical_nodes"], case["ranks_per_node"], case["workers_per_rank"], 0)
    args = (plan.batching_method, plan, world, expected["epoch"], expected["sample_in_epoch"])
    if "error" in expected:
        with pytest.raises(Exception) as raised:
            generate_work(*args)
        assert type(raised.value).__name__ == expected["error"]
    else:
        work = generate_work(*args)
        assert work.dtype == np.int64 and work.flags.c_contiguous
        assert work.tolist() == expected["work"]


def test_plan_inputs_from_an_upstream_style_dataset():
    plan = plan_for(CASES[1])
    dataset = SimpleNamespace(
        streams=[
            SimpleNamespace(choose=c, proportion=p) for c, p in zip(plan.choose_per_stream, plan.proportion_per_stream)
        ],
        **{
            name: getattr(plan, name)
            for name in (
                "samples_per_shard",
                "shards_per_stream",
                "epoch_size",
                "batch_size",
                "num_canonical_nodes",
                "partition_algo",
                "shuffle",
                "shuffle_algo",
                "shuffle_seed",
                "shuffle_block_size",
                "sampling_method",
                "sampling_granularity",
                "initial_physical_nodes",
            )
        },
    )
    world = World(4, 2, 2, 0)
    assert np.array_equal(
        generate_work("per_stream", dataset, world, 1, 0), generate_work("per_stream", plan, world, 1, 0)
    )


def test_plan_inputs_name_missing_attributes():
    with pytest.raises(TypeError, match=r"lacks the epoch-plan attributes \['samples_per_shard'"):
        PlanInputs.from_dataset(SimpleNamespace(batch_size=1))


def test_batch_size_is_required():
    with pytest.raises(ValueError, match="Please pass `batch_size`"):
        PlanInputs([1], [1], [1], [1.0], 1, None, 1)


def test_stream_arrays_must_agree():
    with pytest.raises(ValueError, match="adds up to 2 shards but `samples_per_shard` has 1"):
        PlanInputs([1], [2], [1], [1.0], 1, 1, 1)


def test_unknown_batching_method_lists_the_choices():
    plan = PlanInputs([4], [1], [4], [1.0], 4, 1, 1)
    with pytest.raises(ValueError, match=r"Invalid batching method: mixed\..*`device_per_stream`"):
        generate_work("mixed", plan, World(1, 1, 1, 0), 0, 0)
    assert sorted(batching_methods) == ["device_per_stream", "per_stream", "random", "stratified"]


def test_unshuffled_single_process_plan_is_the_identity():
    plan = PlanInputs([5, 7], [2], [12], [1.0], 12, 4, 1)
    assert generate_work("random", plan, World(1, 1, 1, 0), 0, 0).reshape(-1).tolist() == list(range(12))


def test_default_predownload():
    assert default_predownload(None) == 64
    assert default_predownload(4) == 32


@pytest.mark.parametrize("shuffle_algo", ["py1e", "py1s", "py2s", "py1br", "naive"])
def test_a_shuffled_plan_peaks_at_a_few_arrays_of_the_epoch(shuffle_algo):
    """Building the default plan (random batching, one canonical node, no weights) holds at most three int64
    arrays of the epoch at once (py2s: four): it held up to eight (the shuffle's working arrays beside the
    partition's and the sample ids, and py1e's shifts twice)."""
    import tracemalloc

    num_samples = 1_000_000
    plan = PlanInputs(
        samples_per_shard=np.full(100, 10_000),
        shards_per_stream=[100],
        choose_per_stream=[num_samples],
        proportion_per_stream=[1.0],
        epoch_size=num_samples,
        batch_size=32,
        num_canonical_nodes=1,
        shuffle=True,
        shuffle_algo=shuffle_algo,
        shuffle_block_size=1 << 18,
    )
    tracemalloc.start()
    try:
        generate_work("random", plan, World(1, 1, 1, 0), 0, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    arrays = 4 if shuffle_algo == "py2s" else 3
    assert peak <= arrays * 8 * num_samples * 1.1, f"{peak / num_samples:.1f} bytes per sample at the peak"
