"""Helpers shared by tests: fixture locations and deep comparison of decoded samples."""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def copy_fixture(name: str, dest: str) -> str:
    """Copy ``tests/fixtures/<name>`` to ``dest`` (tests never modify the fixtures in place)."""
    shutil.copytree(os.path.join(FIXTURES, name), dest)
    return dest


def assert_same_value(got: Any, expected: Any, where: str = "") -> None:
    """Compare decoded values: numpy by dtype and value, images by mode, size and pixels, containers deeply."""
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), f"{where}: expected ndarray, got {type(got)}"
        assert got.dtype == expected.dtype and got.shape == expected.shape, where
        assert np.array_equal(got, expected), where
    elif isinstance(expected, np.generic):
        assert type(got) is type(expected), f"{where}: expected {type(expected)}, got {type(got)}"
        assert got == expected or (np.isnan(got) and np.isnan(expected)), where
    elif type(expected).__module__.startswith("PIL."):
        assert got.mode == expected.mode and got.size == expected.size, where
        assert np.array_equal(np.asarray(got), np.asarray(expected)), where
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), f"{where}: keys {set(got)} != {set(expected)}"
        for key in expected:
            assert_same_value(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), where
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_same_value(a, b, f"{where}[{i}]")
    else:
        assert type(got) is type(expected) and got == expected, f"{where}: {got!r} != {expected!r}"
