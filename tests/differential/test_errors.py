"""Bad inputs side by side with streaming-community 0.14.2: when the reference refuses a write, ours refuses it
too, with the same exception type or a subclass of it (so an ``except`` written for the reference still works)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from hypothesis import given

from tests.differential.compare import error_difference, open_difference
from tests.differential.conftest import count_case, differential
from tests.differential.strategies import bad_cases
from tests.differential.test_formats import write_both


def check_bad_case(reference, case: dict[str, Any]) -> None:
    root = tempfile.mkdtemp(prefix="diff-errors-")
    try:
        _, _, ours, theirs = write_both(reference, case, root)
        difference = error_difference(ours, theirs, "write")
        if difference and open_difference(ours, theirs):
            return
        assert difference is None, f"{case['mutation']}: {difference}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@differential(max_examples=300)
@given(case=bad_cases())
def test_bad_inputs_fail_alike(reference, case):
    count_case()
    check_bad_case(reference, case)
