"""Helpers for the Spark tests: the files a dataset holds, and checks that nothing else is left behind."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from typing import Any

import pytest

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


def commit_files(root: str) -> set[str]:
    """The commit log's files: ``_mds_log/<N>.json`` for N = 1 .. the newest, none missing."""
    found = {name for name in files_under(root) if name.startswith("_mds_log/") and name != "_mds_log/index.json"}
    return {f"_mds_log/{version:020d}.json" for version in range(1, len(found) + 1)}


def expected_files(root: str) -> set[str]:
    """The files a committed dataset should hold: index, metadata, commit log, indexed shards and their
    attempts' indexes."""
    shards = load_index(root)["shards"]
    names = {"index.json", "mds_conversion.json", *commit_files(root)}
    if commit_files(root):
        names.add("_mds_log/index.json")  # the log folder's empty index (streaming.format.commit_log.LOG_MARKER)
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


def reference_reads(out: str) -> list[dict[str, Any]]:
    """The samples streaming-community 0.14.2 (MosaicML Streaming) reads, as JSON-able values, by ``id``."""
    python = os.environ.get("MDS_REFERENCE_PYTHON")
    if not python or not os.access(python, os.X_OK):
        pytest.fail("MDS_REFERENCE_PYTHON must name streaming-community 0.14.2's python (make test sets it).")
    script = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        from streaming import LocalDataset
        def plain(value):
            if isinstance(value, np.ndarray):
                return value.tolist()
            if isinstance(value, np.generic):
                return value.item()
            if isinstance(value, bytes):
                return value.hex()
            return value if isinstance(value, (int, float, str, list, dict, type(None))) else str(value)
        dataset = LocalDataset(sys.argv[1])
        samples = [{k: plain(v) for k, v in dataset[i].items()} for i in range(len(dataset))]
        print(json.dumps(sorted(samples, key=lambda s: s["id"])))
        """
    )
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # A generous bound: the reference imports torch and reads every sample; under the three lanes of `make test` on
    # two cores that took over 120 s once, with its output complete.
    done = subprocess.run(
        [python, "-I", "-c", script, out], capture_output=True, text=True, env=environment, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
