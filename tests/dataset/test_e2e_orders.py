"""StreamingDataset through its public API reproduces MosaicML Streaming's epochs and resumption exactly."""

from __future__ import annotations

import json
import os

import pytest

from streaming import StreamingDataset
from tests.helpers import FIXTURES, copy_fixture

with open(os.path.join(FIXTURES, "orders", "e2e.json")) as f:
    CASES = json.load(f)["cases"]


def _dataset(tmp_path, case) -> StreamingDataset:
    kwargs = dict(case["dataset_kwargs"])
    local = copy_fixture(os.path.join("orders", "datasets", kwargs.pop("local")), str(tmp_path / "data"))
    return StreamingDataset(local=local, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_epochs_match_reference(tmp_path, case):
    dataset = _dataset(tmp_path, case)
    for expected in case["epochs"]:
        assert [sample["id"] for sample in dataset] == expected


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_resume_matches_reference(tmp_path, case):
    dataset = _dataset(tmp_path, case)
    dataset.load_state_dict(case["resume_state"])
    assert [sample["id"] for sample in dataset] == case["resumed_order"]
    assert [sample["id"] for sample in dataset] == case["epochs"][1]


@pytest.mark.parametrize("case", CASES[:2], ids=["case0", "case1"])
def test_state_dict_round_trip(tmp_path, case):
    dataset = _dataset(tmp_path, case)
    assert dataset.state_dict(0, True)["epoch"] == -1
    iterator = iter(dataset)
    consumed = [next(iterator)["id"] for _ in range(case["resume_state"]["sample_in_epoch"])]
    state = dataset.state_dict(len(consumed), True)
    assert state == case["resume_state"]
    assert set(state) == {"epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes"}
