"""Streams too small for a batch, against MosaicML Streaming's plans (fixtures/orders/small_streams.json).

With ``per_stream`` batching a stream that cannot fill one global batch (``device_per_stream``:
one device batch on a node) is left out of that epoch with a logged warning, and only a
dataset where no stream can fill one is an error; a stream with fewer samples than canonical
nodes is repeated and not shuffled. The fixture holds, for each case and epoch, the plan (or
the exception type) and the messages streaming-community 0.14.2 logged and warned
(recorded by ``tests/fixtures/orders/record_small_streams.py``).
"""

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

from streaming.dataset.batching import PlanInputs, generate_work
from streaming.dataset.world import World

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures/orders/small_streams.json").read_text())
EPOCHS = [(case, epoch) for case in FIXTURE["cases"] for epoch in case["epochs"]]


def first_sentence(message: str) -> str:
    """A message's first sentence, whitespace normalised: upstream's words that ours begin with."""
    words = " ".join(message.split())
    return words.split(". ")[0].rstrip(".")


def plan_for(case: dict) -> PlanInputs:
    kwargs = case["dataset_kwargs"]
    shard_sizes = case["stream_shard_sizes"]
    return PlanInputs(
        samples_per_shard=np.concatenate([np.array(sizes, np.int64) for sizes in shard_sizes]),
        shards_per_stream=[len(sizes) for sizes in shard_sizes],
        choose_per_stream=case["choose"],
        proportion_per_stream=case["proportion"],
        epoch_size=case["epoch_size"],
        batch_size=kwargs["batch_size"],
        num_canonical_nodes=kwargs["num_canonical_nodes"],
        shuffle=kwargs["shuffle"],
        shuffle_algo=kwargs["shuffle_algo"],
        shuffle_seed=kwargs["shuffle_seed"],
        shuffle_block_size=kwargs["shuffle_block_size"],
        batching_method=kwargs["batching_method"],
    )


def case_id(pair: tuple[dict, dict]) -> str:
    case, epoch = pair
    kwargs = case["dataset_kwargs"]
    sizes = "-".join(str(sum(s)) for s in case["stream_shard_sizes"])
    shuffle = kwargs["shuffle_algo"] if kwargs["shuffle"] else "noshuffle"
    return f"{kwargs['batching_method']}-{sizes}-{shuffle}-e{epoch['epoch']}-s{epoch['sample_in_epoch']}"


def test_the_fixture_covers_skipped_streams_and_the_error():
    logged = [first_sentence(m) for _, epoch in EPOCHS for m in epoch["logged"]]
    assert any(m.startswith("Stream with index 1 does not have an adequate number") for m in logged)
    assert any(m.startswith("Stream with index 1 has 6 samples, fewer than the 8 canonical nodes") for m in logged)
    errors = {(c["dataset_kwargs"]["batching_method"], e.get("error")) for c, e in EPOCHS}
    assert {("per_stream", "ValueError"), ("device_per_stream", "ValueError"), ("per_stream", None)} <= errors


@pytest.mark.parametrize("pair", EPOCHS, ids=[case_id(pair) for pair in EPOCHS])
def test_plan_and_messages_match_upstream(pair, caplog):
    case, expected = pair
    plan = plan_for(case)
    world = World(*case["topology"], 0)
    args = (plan.batching_method, plan, world, expected["epoch"], expected["sample_in_epoch"])
    caplog.set_level(logging.WARNING, logger="streaming")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if "error" in expected:
            with pytest.raises(Exception) as raised:
                generate_work(*args)
            assert type(raised.value).__name__ == expected["error"]
            assert first_sentence(str(raised.value)) == first_sentence(expected["message"])
        else:
            assert generate_work(*args).tolist() == expected["work"]
    ours_logged = [first_sentence(r.getMessage()) for r in caplog.records if r.name.startswith("streaming")]
    assert ours_logged == [first_sentence(m) for m in expected["logged"]]
    assert [first_sentence(str(w.message)) for w in caught] == [first_sentence(m) for m in expected["warned"]]
