"""Checkpoints of a dataset the incremental job keeps, between the two packages.

Such a checkpoint carries one key upstream does not know (``dataset_version``); MosaicML Streaming ignores it and
must resume from it exactly as we do. After a mirror run replaced shards, we refuse that mid-epoch checkpoint,
where the reference resumes it on the new order without a word: the difference issue 26 asks for.
"""

from __future__ import annotations

import gc

import pyarrow as pa

from streaming import StreamingDataset
from streaming.spark import incremental_to_mds
from tests.differential import operations

KWARGS = {"batch_size": 1, "shuffle": True, "shuffle_seed": 7, "num_canonical_nodes": 1}


def _mirror(table: str, out: str) -> None:
    incremental_to_mds(table, out, mode="mirror", key=["id"], size_limit=400, progress=False)


def _checkpoint_after(out: str, samples: int) -> dict:
    dataset = StreamingDataset(local=out, **KWARGS)
    iterator = iter(dataset)
    for _ in range(samples):
        next(iterator)
    state = dataset.state_dict(samples, True)
    del iterator, dataset
    gc.collect()  # release the local folder before the reference opens it
    return state


def test_the_reference_resumes_from_our_versioned_checkpoint_as_we_do(reference, tmp_path):
    from deltalake import DeltaTable, write_deltalake

    table, out = str(tmp_path / "table"), str(tmp_path / "out")
    rows = pa.table({"id": pa.array(range(90), pa.int64()), "text": [f"row {i}" for i in range(90)]})
    write_deltalake(table, rows, configuration={"delta.enableChangeDataFeed": "true"})
    _mirror(table, out)
    whole = operations.resumed_ids(out, KWARGS, {})["ids"]
    state = _checkpoint_after(out, 25)
    assert "dataset_version" in state

    ours = operations.resumed_ids(out, KWARGS, state)
    theirs = reference.call("resumed_ids", local=out, dataset_kwargs=KWARGS, state=state)
    assert ours == theirs == {"ids": whole[25:]}

    DeltaTable(table).delete("id < 3")
    _mirror(table, out)
    ours = operations.resumed_ids(out, KWARGS, state)
    theirs = reference.call("resumed_ids", local=out, dataset_kwargs=KWARGS, state=state)
    assert ours["error"] == "ValueError" and "dataset version" in ours["message"], ours
    assert "error" not in theirs and len(theirs["ids"]) == 87 - 25  # the reference shifts silently
