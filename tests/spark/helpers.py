"""Helpers for the Spark tests: the files a dataset holds, and checks that nothing else is left behind."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from streaming.dataset.local import LocalDataset

MDS_SHARD_KEYS = {
    "column_encodings",
    "column_names",
    "column_sizes",
    "compression",
    "format",
    "hashes",
    "raw_data",
    "samples",
    "size_limit",
    "version",
    "zip_data",
}


def files_under(root: str) -> set[str]:
    """Every file below ``root``, as ``/``-separated relative paths."""
    found = set()
    for folder, _, names in os.walk(root):
        for name in names:
            found.add(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return found


def load_index(root: str) -> dict[str, Any]:
    with open(os.path.join(root, "index.json"), encoding="utf-8") as file:
        return json.load(file)


def expected_files(root: str) -> set[str]:
    """The files a committed dataset should hold: index, metadata, indexed shards and their attempts' indexes."""
    shards = load_index(root)["shards"]
    names = {"index.json", "mds_conversion.json"}
    for shard in shards:
        info = shard["zip_data"] or shard["raw_data"]
        names.add(info["basename"])
        names.add(info["basename"].rsplit("/", 1)[0] + "/index.json")
    return names


def assert_no_orphans(root: str) -> None:
    """Fail if ``root`` holds any file the published index does not account for."""
    extra = files_under(root) - expected_files(root)
    missing = expected_files(root) - files_under(root)
    assert not extra, f"orphan files left behind: {sorted(extra)}"
    assert not missing, f"indexed files missing: {sorted(missing)}"


def read_samples(root: str) -> list[dict[str, Any]]:
    """Every sample of the dataset at ``root``, in index order."""
    return list(LocalDataset(root))


def assert_same(got: Any, expected: Any, where: str = "") -> None:
    """Exact comparison of decoded values: numpy by dtype and bits (NaN equals NaN), containers deeply."""
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype and got.shape == expected.shape, (
            f"{where}: {got!r} != {expected!r}"
        )
        assert np.array_equal(got, expected, equal_nan=expected.dtype.kind == "f"), f"{where}: {got!r} != {expected!r}"
    elif isinstance(expected, np.generic):
        assert type(got) is type(expected), f"{where}: {type(got)} != {type(expected)}"
        assert got.tobytes() == expected.tobytes(), f"{where}: {got!r} != {expected!r}"
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected), f"{where}: {got!r} != {expected!r}"
        for key in expected:
            assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{where}: {got!r} != {expected!r}"
        for index, (a, b) in enumerate(zip(got, expected)):
            assert_same(a, b, f"{where}[{index}]")
    else:
        assert type(got) is type(expected) and (got == expected or got != got and expected != expected), (
            f"{where}: {got!r} != {expected!r}"
        )
        if type(expected).__name__ == "Decimal":
            assert str(got) == str(expected), f"{where}: {got!r} != {expected!r} (scale)"
