"""Dataset arguments the reference checks only when it uses them, side by side with streaming-community 0.14.2.

Each case walks one StreamingDataset through construction, ``state_dict``, an epoch and ``state_dict`` again
(`operations.dataset_lifecycle`) in both packages: an argument the reference accepts because it never uses it
must be accepted here too, and one it refuses must be refused at the same step with a compatible exception type
(`compare.lifecycle_difference`). Issue 36: public code still builds in-order datasets with ``shuffle_algo='py1b'``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from streaming import MDSWriter
from tests.differential import operations
from tests.differential.compare import lifecycle_difference

TWO_STREAMS = [{"proportion": 0.5}, {"folder": "small", "proportion": 0.5}]
MIXED = [{}, {"folder": "small"}]

#: id -> (streams, dataset arguments beside batch_size=2); a stream's "folder" is "large" unless it says "small".
CASES: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "removed shuffle_algo, in order": ([{}], {"shuffle_algo": "py1b"}),
    "removed shuffle_algo, shuffled": ([{}], {"shuffle_algo": "py1b", "shuffle": True}),
    "removed shuffle_algo, stratified shuffle": (
        TWO_STREAMS,
        {"shuffle_algo": "py1b", "shuffle": True, "batching_method": "stratified"},
    ),
    "removed shuffle_algo, per_stream in order": (MIXED, {"shuffle_algo": "py1b", "batching_method": "per_stream"}),
    "shuffle_algo None, in order": ([{}], {"shuffle_algo": None}),
    "unknown partition_algo": ([{}], {"partition_algo": "nope"}),
    "unknown partition_algo, device_per_stream": (
        MIXED,
        {"partition_algo": "nope", "batching_method": "device_per_stream"},
    ),
    "unknown partition and shuffle": ([{}], {"partition_algo": "nope", "shuffle_algo": "py1b", "shuffle": True}),
    "num_canonical_nodes 0 (unset)": ([{}], {"num_canonical_nodes": 0}),
    "num_canonical_nodes 0 with py1s": ([{}], {"num_canonical_nodes": 0, "shuffle_algo": "py1s", "shuffle": True}),
    "num_canonical_nodes -1": ([{}], {"num_canonical_nodes": -1}),
    "batch_size 0": ([{}], {"batch_size": 0}),
    "batch_size -1": ([{}], {"batch_size": -1}),
    "batch_size None": ([{}], {"batch_size": None}),
    "batch_size 2.0": ([{}], {"batch_size": 2.0}),
    "shuffle_block_size 0 in order": ([{}], {"shuffle_block_size": 0}),
    "shuffle_block_size 0 shuffled": ([{}], {"shuffle_block_size": 0, "shuffle": True}),
    "shuffle_block_size -3 naive": ([{}], {"shuffle_block_size": -3, "shuffle": True, "shuffle_algo": "naive"}),
    "shuffle_block_size 2.5 shuffled": ([{}], {"shuffle_block_size": 2.5, "shuffle": True}),
    "epoch_size 0": ([{}], {"epoch_size": 0}),
    "epoch_size empty": ([{}], {"epoch_size": ""}),
    "epoch_size '0' with proportions": (TWO_STREAMS, {"epoch_size": "0"}),
    "epoch_size -1": ([{}], {"epoch_size": -1}),
    "epoch_size abc": ([{}], {"epoch_size": "abc"}),
    "epoch_size 2.5": ([{}], {"epoch_size": 2.5}),
    "epoch_size with absolute weights": ([{"repeat": 2}, {"folder": "small"}], {"epoch_size": 10}),
    "replication 0": ([{}], {"replication": 0}),
    "replication -1": ([{}], {"replication": -1}),
    "replication 1": ([{}], {"replication": 1}),
    "replication 2 of one rank": ([{}], {"replication": 2}),
    "sampling_method unknown": ([{}], {"sampling_method": "x"}),
    "sampling_granularity 0": ([{}], {"sampling_granularity": 0}),
    "batching_method unknown": ([{}], {"batching_method": "x"}),
    "stratified with a stream too small for a slot": (
        [{"proportion": 0.01}, {"folder": "small", "proportion": 0.99}],
        {"batching_method": "stratified"},
    ),
    "device_per_stream on 3 canonical nodes": (
        [{}],
        {"batching_method": "device_per_stream", "num_canonical_nodes": 3},
    ),
    "download_retry -1 of a local dataset": ([{}], {"download_retry": -1}),
    "download_timeout 0 of a local dataset": ([{}], {"download_timeout": 0}),
    "proportion 0": ([{"proportion": 0.0}, {"folder": "small", "proportion": 1.0}], {}),
    "proportion negative": ([{"proportion": -1.0}, {"folder": "small", "proportion": 1.0}], {}),
    "repeat 0": ([{"repeat": 0}, {"folder": "small"}], {}),
    "repeat negative": ([{"repeat": -1}, {"folder": "small"}], {}),
    "choose negative": ([{"choose": -1}, {"folder": "small"}], {}),
    "relative and absolute weights": ([{"proportion": 0.5}, {"folder": "small", "repeat": 2}], {}),
    "two weights on one stream": ([{"repeat": 2, "choose": 3}, {"folder": "small"}], {}),
}


@pytest.fixture(scope="module")
def id_folders(tmp_path_factory) -> dict[str, str]:
    """Two MDS datasets whose ``id`` column numbers their samples: 20 in two shards, and 6 in one."""
    root = tmp_path_factory.mktemp("arguments")
    folders = {}
    for name, shard_sizes in (("large", [10, 10]), ("small", [6])):
        folders[name] = out = os.path.join(root, name)
        with MDSWriter(out=out, columns={"id": "int64"}, size_limit=None) as writer:
            sample_id = 0
            for size in shard_sizes:
                for _ in range(size):
                    writer.write({"id": sample_id})
                    sample_id += 1
                writer.flush_shard()
    return folders


def check_lifecycle(reference, folders: dict[str, str], streams, kwargs, state=None) -> dict[str, Any]:
    located = []
    for stream in streams:
        weights = {key: value for key, value in stream.items() if key != "folder"}
        located.append({"local": folders[stream.get("folder", "large")], **weights})
    arguments = {"streams": located, "dataset_kwargs": {"batch_size": 2, **kwargs}, "state": state}
    ours = operations.dataset_lifecycle(**arguments)
    theirs = reference.call("dataset_lifecycle", **arguments)
    difference = lifecycle_difference(ours, theirs)
    assert difference is None, f"{kwargs}, {streams}: {difference}\n ours   {ours}\n theirs {theirs}"
    return ours


@pytest.mark.parametrize("case", list(CASES))
def test_arguments_fail_where_the_reference_fails(reference, id_folders, case):
    streams, kwargs = CASES[case]
    check_lifecycle(reference, id_folders, streams, kwargs)


def test_removed_shuffle_algo_reads_in_order_and_fails_shuffled_at_the_first_epoch(reference, id_folders):
    """Issue 36 itself: built with ``py1b``, a dataset reads in order; shuffled, its first epoch raises KeyError."""
    in_order = check_lifecycle(reference, id_folders, [{}], {"shuffle_algo": "py1b"})
    assert dict(in_order["steps"])["iterate"] == list(range(20))
    shuffled = check_lifecycle(reference, id_folders, [{}], {"shuffle_algo": "py1b", "shuffle": True})
    failed_at, error = shuffled["steps"][-1]
    assert failed_at == "iterate" and "KeyError" in error["mro"] and "py1b" in error["message"], shuffled


#: Checkpoints the reference writes or takes (id -> dataset arguments beside batch_size=2, the checkpoint): each
#: resumes alike; `tests/dataset/test_checkpoint_values.py` has the ones we refuse and it does not.
RESUMED = {
    "mid-epoch": ({"shuffle": True}, {"epoch": 0, "sample_in_epoch": 4, "num_canonical_nodes": 2, "shuffle_seed": 3}),
    "taken before the first epoch": (
        {"shuffle": True},
        {
            "epoch": -1,
            "sample_in_epoch": 0,
            "num_canonical_nodes": 1,
            "shuffle_seed": 9176,
            "initial_physical_nodes": 1,
        },
    ),
    "at the end of the epoch": (
        {"shuffle": True},
        {
            "epoch": 0,
            "sample_in_epoch": 20,
            "num_canonical_nodes": 1,
            "shuffle_seed": 9176,
            "initial_physical_nodes": 1,
        },
    ),
    "past the end by a rank's padding": (
        {},
        {
            "epoch": 0,
            "sample_in_epoch": 21,
            "num_canonical_nodes": 1,
            "shuffle_seed": 9176,
            "initial_physical_nodes": 1,
        },
    ),
    "past the end of the padding": (
        {},
        {
            "epoch": 0,
            "sample_in_epoch": 22,
            "num_canonical_nodes": 1,
            "shuffle_seed": 9176,
            "initial_physical_nodes": 1,
        },
    ),
    "py1s's 64 canonical nodes on 20 samples": (
        {"shuffle": True, "shuffle_algo": "py1s"},
        {
            "epoch": 0,
            "sample_in_epoch": 3,
            "num_canonical_nodes": 64,
            "shuffle_seed": 9176,
            "initial_physical_nodes": 1,
        },
    ),
    "a later epoch, stratified": (
        {"shuffle": True, "batching_method": "stratified"},
        {"epoch": 3, "sample_in_epoch": 6, "num_canonical_nodes": 1, "shuffle_seed": 5, "initial_physical_nodes": 1},
    ),
}


@pytest.mark.parametrize("case", list(RESUMED))
def test_checkpoints_of_the_reference_resume_alike(reference, id_folders, case):
    kwargs, state = RESUMED[case]
    check_lifecycle(reference, id_folders, [{}], kwargs, state)
