"""Writers and readers side by side with streaming-community 0.14.2, on generated datasets of every writer and
encoding: the same files are written, and each package's reader decodes the other's output as its own."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hypothesis import given

from tests.differential import operations
from tests.differential.compare import file_differences, reading_deviation, result_difference
from tests.differential.conftest import count_case, differential
from tests.differential.reference import ReferenceWorker
from tests.differential.strategies import dataset_cases


def write_both(reference: ReferenceWorker, case: dict[str, Any], root: str) -> tuple[str, str, dict, dict]:
    """Write ``case`` with our writer and with the reference's into two new folders under ``root``."""
    arguments = {key: value for key, value in case.items() if key != "mutation"}
    ours_dir, reference_dir = os.path.join(root, "ours"), os.path.join(root, "reference")
    ours = operations.write(out=ours_dir, **arguments)
    theirs = reference.call("write", out=reference_dir, **arguments)
    return ours_dir, reference_dir, ours, theirs


def check_dataset_case(reference: ReferenceWorker, case: dict[str, Any]) -> None:
    """Assert that both packages write the same files and read both outputs the same way."""
    root = tempfile.mkdtemp(prefix="diff-formats-")
    try:
        ours_dir, reference_dir, ours, theirs = write_both(reference, case, root)
        if "error" in ours or "error" in theirs:
            difference = result_difference(ours, theirs)
            assert difference is None, f"writing a valid dataset: {difference}"
            return
        differences, _ = file_differences(ours["files"], theirs["files"])
        assert not differences, "written files differ:\n" + "\n".join(differences)
        folders = [ours_dir] if ours["files"] == theirs["files"] else [ours_dir, reference_dir]
        for folder in folders:
            who = "ours" if folder == ours_dir else "the reference's"
            decoded_by_us = operations.read(folder)
            decoded_by_them = reference.call("read", folder=folder)
            difference = result_difference(decoded_by_us, decoded_by_them)
            if difference and reading_deviation(decoded_by_us, decoded_by_them):
                continue
            assert difference is None, f"reading {who} output: {difference}"
            assert "error" not in decoded_by_us, f"reading {who} output failed in both: {decoded_by_us}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@differential(max_examples=350)
@given(case=dataset_cases())
def test_writers_and_readers_agree(reference, case):
    count_case()
    check_dataset_case(reference, case)


@differential(max_examples=120)
@given(case=dataset_cases(writer="mds", max_samples=4))
def test_mds_every_encoding_agrees(reference, case):
    count_case()
    check_dataset_case(reference, case)
