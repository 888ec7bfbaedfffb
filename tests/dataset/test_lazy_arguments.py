"""Arguments checked when they are used, as upstream checks them (issue 36): unknown ``shuffle_algo`` and
``partition_algo`` names, warned of at construction and refused when a shuffle or a partition is built, and a
negative ``predownload``, refused at the first epoch.

MosaicML Streaming looks the names up only when it builds a shuffle or a partition; public code still builds
in-order datasets with ``shuffle_algo='py1b'`` (removed upstream). The differential suite compares every step
with the reference (`tests/differential/test_arguments.py`); this checks our side without it.
"""

from __future__ import annotations

import pytest

from streaming import MDSWriter, StreamingDataset
from streaming.dataset.errors import UnknownAlgorithmError


@pytest.fixture
def local(tmp_path):
    out = str(tmp_path / "ds")
    with MDSWriter(out=out, columns={"id": "int"}, size_limit=200) as writer:
        for sample_id in range(30):
            writer.write({"id": sample_id})
    return out


def test_removed_shuffle_algo_reads_in_order_with_a_warning(local):
    with pytest.warns(UserWarning, match=r"Unknown shuffle_algo 'py1b'.*unused while shuffle=False"):
        dataset = StreamingDataset(local=local, batch_size=4, shuffle_algo="py1b")
    assert [sample["id"] for sample in dataset] == list(range(30))
    assert dataset.state_dict(30, True)["sample_in_epoch"] == 30


def test_removed_shuffle_algo_fails_at_the_first_shuffled_epoch_as_a_key_error(local):
    with pytest.warns(UserWarning, match="the first epoch will raise UnknownAlgorithmError"):
        dataset = StreamingDataset(local=local, batch_size=4, shuffle=True, shuffle_algo="py1b")
    assert dataset.state_dict(0, False)["epoch"] == -1
    with pytest.raises(KeyError) as raised:
        next(iter(dataset))
    assert isinstance(raised.value, UnknownAlgorithmError)
    assert str(raised.value).startswith("Unknown shuffle_algo 'py1b'; choose one of ['naive', 'py1br'")


def test_unknown_partition_algo_fails_at_the_first_epoch(local):
    with pytest.warns(UserWarning, match="Unknown partition_algo 'nope'"):
        dataset = StreamingDataset(local=local, batch_size=4, partition_algo="nope")
    with pytest.raises(UnknownAlgorithmError, match="Unknown partition_algo 'nope'; choose one of"):
        next(iter(dataset))


def test_known_algorithms_build_without_a_warning(local, recwarn):
    StreamingDataset(local=local, batch_size=4, shuffle=True, shuffle_algo="py1br", partition_algo="orig")
    assert not [warning for warning in recwarn if "algo" in str(warning.message)]


def test_negative_predownload_reads_by_index_and_fails_at_the_first_epoch(local):
    """Upstream builds such a dataset and then waits forever at its first epoch; random access never uses it."""
    with pytest.warns(UserWarning, match=r"predownload < batch_size \(-1 < 4\)"):
        dataset = StreamingDataset(local=local, batch_size=4, predownload=-1)
    assert dataset[7]["id"] == 7
    with pytest.raises(ValueError, match="predownload must be non-negative to iterate, got -1"):
        next(iter(dataset))
