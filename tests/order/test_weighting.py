"""Stream weighting (proportion / repeat / choose) and per-epoch resampling."""

import numpy as np
import pytest

from streaming.dataset.weighting import StreamWeight, apply_weights, resample_streams, resolve_weights, validate_weights


def test_relative_weights_split_the_epoch_and_hand_out_the_shortfall():
    weights = [StreamWeight(proportion=1), StreamWeight(proportion=1), StreamWeight(proportion=1)]
    resolved = resolve_weights(weights, [10, 20, 30], 100, seed=7)
    assert resolved.epoch_size == 100
    assert sorted(resolved.choose.tolist()) == [33, 33, 34]
    assert np.allclose(resolved.proportion, 1 / 3)
    assert np.allclose(resolved.repeat, resolved.choose / [10, 20, 30])


def test_relative_weights_default_to_the_dataset_size():
    resolved = resolve_weights([StreamWeight(proportion=3), StreamWeight(proportion=1)], [5, 3], None, 0)
    assert resolved.choose.tolist() == [6, 2]


def test_unspecified_weights_with_epoch_size_follow_stream_sizes():
    resolved = resolve_weights([StreamWeight(), StreamWeight()], [30, 10], 8, 0)
    assert resolved.choose.tolist() == [6, 2]
    assert resolved.proportion.tolist() == [0.75, 0.25]


def test_absolute_weights():
    weights = [StreamWeight(repeat=2.5), StreamWeight(choose=7), StreamWeight()]
    resolved = resolve_weights(weights, [3, 10, 4], None, 0)
    assert resolved.choose.tolist() == [7, 7, 4]
    assert resolved.repeat.tolist() == [7 / 3, 0.7, 1.0]
    assert resolved.proportion.tolist() == [7 / 18, 7 / 18, 4 / 18]
    assert apply_weights(weights, [3, 10, 4], None, 0) == 18


def test_epoch_size_with_absolute_weights_is_rejected():
    with pytest.raises(ValueError, match="`epoch_size` can only be given"):
        resolve_weights([StreamWeight(repeat=1)], [3], 10, 0)


def test_mixing_relative_and_absolute_names_the_stream():
    with pytest.raises(ValueError, match="stream 1 differs"):
        validate_weights([StreamWeight(proportion=1), StreamWeight(choose=3)])


def test_stream_weight_validation():
    with pytest.raises(ValueError, match=r"\['choose', 'repeat'\]"):
        StreamWeight(repeat=1, choose=2)
    with pytest.raises(ValueError, match="`proportion` must be non-negative"):
        StreamWeight(proportion=-0.5)


def test_resample_full_repeats_and_a_partial_repeat():
    units, ids = resample_streams([4, 2], [2], [11], seed=3, epoch=0)
    assert units.sum() == len(ids) == 11
    per_shard = {0: ids[ids < 4], 1: ids[ids >= 4]}
    assert len(per_shard[0]) + len(per_shard[1]) == 11
    assert sorted(set(per_shard[0].tolist())) == [0, 1, 2, 3]
    assert sorted(set(per_shard[1].tolist())) == [4, 5]


def test_resample_identity_without_weights():
    units, ids = resample_streams([3, 0, 2, 5], [2, 2], [3, 7], seed=0, epoch=4)
    assert units.tolist() == [3, 2, 5]
    assert ids.tolist() == list(range(10))


def test_resample_one_stream_keeps_global_ids():
    units, ids = resample_streams([3, 2, 5], [2, 1], [5, 5], seed=0, epoch=0, stream_id=1)
    assert units.tolist() == [5]
    assert ids.tolist() == [5, 6, 7, 8, 9]


def test_balanced_sampling_changes_partial_samples_per_epoch_and_fixed_does_not():
    def pick(method, epoch):
        return resample_streams([50], [1], [20], 1, epoch, method, 1, True)[1].tolist()

    assert pick("fixed", 0) == pick("fixed", 1)
    assert pick("balanced", 0) != pick("balanced", 1)


def test_unknown_sampling_method_lists_the_choices():
    with pytest.raises(ValueError, match=r"'random'.*'balanced', 'fixed'"):
        resample_streams([1], [1], [1], 0, 0, "random")
