"""`checked_resume` on checkpoints as clients hand them over: numpy integers, a damaged version, a finished epoch.

The behaviour on real datasets (mirror and append runs, composer's Trainer, the reference) is tested in
tests/incremental/test_mirror.py, tests/cli/test_incremental.py, tests/differential/test_resume.py and
tests/clients/."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.dataset.checkpoint_version import VERSION_KEY, checked_resume

STATE = {"epoch": 2, "num_canonical_nodes": 1, "shuffle_seed": 9176, "initial_physical_nodes": 1}


def test_numpy_positions_are_checked_like_ints():
    state = {**STATE, "epoch": np.int64(2), "sample_in_epoch": np.int64(5)}
    state[VERSION_KEY] = {"fingerprint": "0" * 16, "epoch_size": np.int64(10)}
    with pytest.raises(ValueError, match="sample 5 of epoch 2 on dataset version 0000000000000000"):
        checked_resume(state, "1" * 16, 9)


@pytest.mark.parametrize("recorded", ["0" * 16, {"fingerprint": 1, "epoch_size": 10}, {"fingerprint": "0" * 16}])
def test_a_damaged_version_is_refused_naming_the_key(recorded):
    with pytest.raises(ValueError, match="'dataset_version' must be"):
        checked_resume({**STATE, "sample_in_epoch": 5, VERSION_KEY: recorded}, "1" * 16, 9)


def test_a_finished_epoch_is_remapped_to_the_end_of_that_epoch_on_the_new_version():
    state = {**STATE, "sample_in_epoch": 10, VERSION_KEY: {"fingerprint": "0" * 16, "epoch_size": 10}}
    with pytest.warns(UserWarning, match="finished epoch 2"):
        remapped = checked_resume(state, "1" * 16, 7)
    assert remapped == {**STATE, "sample_in_epoch": 7, VERSION_KEY: {"fingerprint": "1" * 16, "epoch_size": 7}}
    assert checked_resume(state, "0" * 16, 7) is state  # the same version: as it is
