"""Sample order side by side with streaming-community 0.14.2: partitions, shuffles, per-shard sampling, and whole
epoch plans of StreamingDatasets (every batching method, weighting, resumption point) for simulated worlds."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from tests.differential import operations
from tests.differential.compare import open_difference, result_difference
from tests.differential.conftest import count_case, differential
from tests.differential.strategies import partition_args, plan_cases, sampling_args, shuffle_args


def check_function(reference, function: str, args: list[Any]) -> None:
    ours = operations.order_function(function, args)
    theirs = reference.call("order_function", function=function, args=args)
    difference = result_difference(ours, theirs, function)
    assert difference is None, f"{function}{tuple(args)}: {difference}"


@differential(max_examples=500)
@given(args=partition_args())
def test_partitions_agree(reference, args):
    count_case()
    check_function(reference, "partitions", args)


@differential(max_examples=500)
@given(args=shuffle_args())
def test_shuffles_agree(reference, args):
    count_case()
    check_function(reference, "shuffle", args)


@differential(max_examples=400)
@given(args=sampling_args())
def test_sampling_agrees(reference, args):
    count_case()
    check_function(reference, "sampling", args)


def check_plan(reference, stream_folders, case: dict[str, Any]) -> None:
    streams = []
    for position, stream in enumerate(case["streams"]):
        weights = {key: value for key, value in stream.items() if key != "shard_sizes"}
        streams.append({"local": stream_folders.folder(position, stream["shard_sizes"]), **weights})
    arguments = {**case, "streams": streams}
    ours = operations.epoch_plan(**arguments)
    theirs = reference.call("epoch_plan", **arguments)
    difference = result_difference(ours, theirs)
    if difference and open_difference(ours, theirs):
        return
    assert difference is None, f"epoch plan of {case}: {difference}"


@differential(max_examples=150)
@given(case=plan_cases())
def test_epoch_plans_agree(reference, stream_folders, case):
    count_case()
    check_plan(reference, stream_folders, case)
