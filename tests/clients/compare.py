"""Element-for-element comparison of the two sides' dumps, naming the first place they differ."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np


def load(work: Path, side: str, name: str) -> dict[str, Any]:
    path = work / side / "dumps" / f"{name}.pkl"
    assert path.is_file(), f"{side} produced no {name} (see its log)"
    return pickle.loads(path.read_bytes())


def first_difference(expected: Any, actual: Any, where: str = "") -> str | None:
    """None when equal in value, shape, dtype and structure; else where and how they first differ."""
    if isinstance(expected, np.ndarray) or isinstance(actual, np.ndarray):
        if not (isinstance(expected, np.ndarray) and isinstance(actual, np.ndarray)):
            return f"{where}: {type(expected).__name__} vs {type(actual).__name__}"
        if expected.dtype != actual.dtype or expected.shape != actual.shape:
            return f"{where}: {expected.dtype}{expected.shape} vs {actual.dtype}{actual.shape}"
        if not np.array_equal(expected, actual, equal_nan=expected.dtype.kind == "f"):
            index = tuple(int(i) for i in np.argwhere(expected != actual)[0])
            return f"{where}{list(index)}: {expected[index]!r} vs {actual[index]!r}"
        return None
    if isinstance(expected, dict) and isinstance(actual, dict):
        if sorted(expected) != sorted(actual):
            return f"{where}: keys {sorted(expected)} vs {sorted(actual)}"
        for key in expected:
            found = first_difference(expected[key], actual[key], f"{where}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return f"{where}: {len(expected)} items vs {len(actual)}"
        for index, (left, right) in enumerate(zip(expected, actual)):
            found = first_difference(left, right, f"{where}[{index}]")
            if found:
                return found
        return None
    if type(expected) is not type(actual) or expected != actual:
        return f"{where}: {expected!r} vs {actual!r}"
    return None


def assert_same_outcome(reference: dict[str, Any], ours: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Both raised the same kind of error, or neither did and ``keys`` of the results are equal element for
    element (the reference's error type must be among ours's bases: a drop-in may refine it, not change it)."""
    if "error" in reference:
        assert "error" in ours, f"the reference raised {reference['error']}; ours did not"
        assert reference["error_types"][0] in ours["error_types"], (
            f"the reference raised {reference['error']}; ours raised {ours['error']}"
        )
        return
    assert "error" not in ours, f"ours raised {ours['error']}\n{ours['traceback']}"
    for key in keys:
        difference = first_difference(reference[key], ours[key], key)
        assert difference is None, f"first difference (reference vs ours): {difference}"


def batch_count(result: dict[str, Any]) -> int:
    if "ranks" in result:
        return sum(len(batches) for batches in result["ranks"])
    return len(result["batches"])
