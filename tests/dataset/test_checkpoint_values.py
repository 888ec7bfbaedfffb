"""Checkpoints are checked like an index before ``load_state_dict`` takes them (issue 34, attack 6).

Each attack is a checkpoint file's values on a 100-sample dataset: refused at ``load_state_dict`` with an error
naming the key, where it used to allocate gigabytes, inflate the epoch or skip into it. Checkpoints the reference
writes still load (here, and beside streaming-community 0.14.2 in ``tests/differential/test_arguments.py``).
"""

from __future__ import annotations

import pytest

from streaming import MDSWriter, StreamingDataset
from streaming.dataset.errors import InvalidCheckpointError, PlanMemoryError

SAMPLES = 100


@pytest.fixture
def local(tmp_path):
    out = str(tmp_path / "ds")
    with MDSWriter(out=out, columns={"id": "int"}, size_limit=400) as writer:
        for sample_id in range(SAMPLES):
            writer.write({"id": sample_id})
    return out


def _checkpoint(**values):
    return {"epoch": 0, "sample_in_epoch": 0, "num_canonical_nodes": 1, "shuffle_seed": 9176, **values}


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"num_canonical_nodes": 10**9}, "'num_canonical_nodes' is 1000000000, outside 1..100"),
        ({"num_canonical_nodes": 10**6}, "'num_canonical_nodes' is 1000000, outside 1..100"),
        ({"sample_in_epoch": -5}, "'sample_in_epoch' is -5, outside 0.."),
        ({"sample_in_epoch": 10**12}, "'sample_in_epoch' is 1000000000000, outside 0.."),
        ({"num_canonical_nodes": 0}, "'num_canonical_nodes' is 0, outside 1.."),
        ({"initial_physical_nodes": 10**6, "num_canonical_nodes": 64 * 10**6}, "'initial_physical_nodes' is 1000000"),
        ({"shuffle_seed": -1}, "'shuffle_seed' is -1"),
        ({"epoch": -2}, "'epoch' is -2"),
        ({"epoch": 2**70}, "'epoch' is 1180591620717411303424"),
        ({"epoch": "0"}, "'epoch' must be an integer, got '0'"),
        ({"sample_in_epoch": 1.5}, "'sample_in_epoch' must be an integer, got 1.5"),
        ({"num_canonical_nodes": True}, "'num_canonical_nodes' must be an integer, got True"),
        ({"shuffle_seed": "\x1b[2J"}, r"'shuffle_seed' must be an integer, got '\x1b[2J'"),
    ],
)
def test_out_of_range_checkpoints_are_refused_at_load(local, values, named):
    dataset = StreamingDataset(local=local, batch_size=4, shuffle=True)
    with pytest.raises(InvalidCheckpointError) as raised:
        dataset.load_state_dict(_checkpoint(**values))
    assert named in str(raised.value)
    assert "\x1b" not in str(raised.value)
    # Nothing was stored: the dataset reads its first epoch from the start.
    assert sorted(sample["id"] for sample in dataset) == list(range(SAMPLES))


def test_a_checkpoint_without_its_keys_is_refused_as_a_key_error(local):
    dataset = StreamingDataset(local=local, batch_size=4)
    with pytest.raises(KeyError, match=r"lacks \['num_canonical_nodes', 'shuffle_seed'\]"):
        dataset.load_state_dict({"epoch": 0, "sample_in_epoch": 3})
    with pytest.raises(ValueError, match="a checkpoint is a dict, got list"):
        dataset.load_state_dict([0, 3])  # type: ignore[arg-type]


def test_the_plan_of_a_checkpoint_is_sized_with_its_canonical_nodes(local):
    """The dataset's own num_canonical_nodes bounds a checkpoint's; a plan of 10**11 canonical nodes is refused at load,
    and at the first epoch without a checkpoint, before anything is allocated."""
    canonical = 10**11
    dataset = StreamingDataset(local=local, batch_size=4, num_canonical_nodes=canonical)
    with pytest.raises(
        PlanMemoryError, match="this checkpoint covers 100 samples laid out over 100000000000 canonical nodes"
    ):
        dataset.load_state_dict(_checkpoint(num_canonical_nodes=canonical))
    with pytest.raises(PlanMemoryError, match="covers 100 samples laid out over 100000000000 canonical nodes"):
        next(iter(dataset))


@pytest.mark.parametrize(
    ("kwargs", "values", "expected"),
    [
        # Taken before the first epoch (upstream's state_dict then says epoch -1): ignored.
        ({}, {"epoch": -1, "sample_in_epoch": 0}, list(range(SAMPLES))),
        # Upstream's older checkpoints have no initial_physical_nodes.
        ({}, {"sample_in_epoch": 96}, list(range(96, SAMPLES))),
        # The end of the epoch, as a rank's padded share counts it.
        ({}, {"sample_in_epoch": SAMPLES + 1}, []),
        # py1s's default of 64 canonical nodes per node, of a first run on 2 nodes: more canonical nodes than
        # samples, so each of the 128 yields one (upstream repeats samples so).
        ({"shuffle": True, "shuffle_algo": "py1s"}, {"num_canonical_nodes": 128, "initial_physical_nodes": 2}, None),
    ],
)
def test_checkpoints_the_reference_writes_load(local, kwargs, values, expected):
    dataset = StreamingDataset(local=local, batch_size=4, **kwargs)
    dataset.load_state_dict(_checkpoint(**values))
    ids = [sample["id"] for sample in dataset]
    if expected is not None:
        assert ids == expected
    else:
        assert len(ids) == 128 and set(ids) == set(range(SAMPLES))


def test_numpy_integers_are_stored_as_ints(local):
    """A checkpoint whose counters are numpy integers (a framework's own arithmetic) loads; it was refused by
    the JSON the resume state is stored as."""
    import numpy as np

    dataset = StreamingDataset(local=local, batch_size=4)
    dataset.load_state_dict({key: np.int64(value) for key, value in _checkpoint(sample_in_epoch=90).items()})
    assert [sample["id"] for sample in dataset] == list(range(90, SAMPLES))


def test_a_checkpoint_of_an_epoch_too_large_to_plan_whole_resumes_when_its_share_is_streamed(local, monkeypatch):
    """A billion-sample epoch starts streamed (no whole plan); its checkpoint must resume the same way, not be
    refused for a plan nobody builds. Here the machine's memory is made too small for this epoch's whole plan."""
    import streaming.dataset.plan_memory as plan_memory

    monkeypatch.setattr(plan_memory, "available_memory", lambda: 1_000)
    streamed = StreamingDataset(local=local, batch_size=4, shuffle=True, shuffle_block_size=100)
    streamed.load_state_dict(_checkpoint(sample_in_epoch=60, shuffle_seed=7))
    resumed = [sample["id"] for sample in streamed]
    assert len(resumed) == SAMPLES - 60
    # The tail of the same epoch read from its start (tests/order checks that order against the whole plan's).
    monkeypatch.undo()
    whole = StreamingDataset(local=local, batch_size=4, shuffle=True, shuffle_block_size=100, shuffle_seed=7)
    assert [sample["id"] for sample in whole][60:] == resumed
    # A layout that is only ever planned whole is still sized, and refused.
    monkeypatch.setattr(plan_memory, "available_memory", lambda: 1_000)
    whole_only = StreamingDataset(local=local, batch_size=4, shuffle=True, shuffle_algo="naive")
    with pytest.raises(PlanMemoryError, match="this checkpoint covers 100 samples"):
        whole_only.load_state_dict(_checkpoint(sample_in_epoch=60))
