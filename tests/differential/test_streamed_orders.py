"""Orders a reader computes as it reads them (``py1e``, ``py1s``, ``py1br``, no shuffle on one canonical node:
`streaming.dataset.streamed_share`), against the reference's dataset iterating the same shards, from the start
and from a checkpoint mid-epoch. Small shards and blocks, so the blocks overlap and the pieces are many."""

from __future__ import annotations

import pytest

from streaming import MDSWriter
from tests.differential import operations

SAMPLES = 3_000


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    out = tmp_path_factory.mktemp("streamed-orders") / "ds"
    with MDSWriter(out=str(out), columns={"id": "int64"}, size_limit=1 << 11) as writer:
        for number in range(SAMPLES):
            writer.write({"id": number})
    return str(out)


@pytest.mark.parametrize("algo", ["py1e", "py1s", "py1br", None])
@pytest.mark.parametrize("sample_in_epoch", [0, 1_234])
def test_a_streamed_order_is_the_references(reference, local, algo, sample_in_epoch):
    kwargs = {"batch_size": 4, "shuffle": algo is not None, "shuffle_seed": 11, "num_canonical_nodes": 1}
    if algo is not None:
        kwargs.update(shuffle_algo=algo, shuffle_block_size=600)
    state = {
        "epoch": 0,
        "sample_in_epoch": sample_in_epoch,
        "num_canonical_nodes": 1,
        "shuffle_seed": 11,
        "initial_physical_nodes": 1,
    }
    ours = operations.resumed_ids(local, kwargs, state)
    theirs = reference.call("resumed_ids", local=local, dataset_kwargs=kwargs, state=state)
    assert "error" not in ours, ours
    assert len(ours["ids"]) == SAMPLES - sample_in_epoch
    assert ours == theirs
