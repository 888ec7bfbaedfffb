"""Shard downloads through awscrt (`streaming/storage/s3_native.py`) against the real SeaweedFS server.

The oracle is boto3 and the server: the bytes must equal what boto3 reads, every failure must surface as the
error boto3's path raises for it, and DataLoader workers forked from a process with a native client must not
touch awscrt (its maintainers do not support fork). Each check runs in a fresh interpreter
(`tests/remote/s3_native_checks.py`), so that no awscrt thread lives in the test process that forks the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from streaming.storage.url import join_url
from tests.remote.data import NUM_SAMPLES, read_remote_index, write_dataset

pytestmark = pytest.mark.services
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def s3(remote_factory):
    return remote_factory("s3")


def _check(*arguments: str, native: str = "1") -> dict[str, Any]:
    """Run one check of `s3_native_checks` in a fresh interpreter (``STREAMING_S3_NATIVE=native``)."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.remote.s3_native_checks", *arguments],
        env={**os.environ, "STREAMING_S3_NATIVE": native},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _a_shard(root: str, scratch: str) -> tuple[str, int]:
    shard = read_remote_index(root, scratch)["shards"][0]
    info = shard.get("zip_data") or shard["raw_data"]
    return join_url(root, info["basename"]), info["bytes"]


def test_a_native_download_has_boto3_bytes(s3, tmp_path):
    write_dataset(s3.root)
    url, size = _a_shard(s3.root, str(tmp_path))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    seen = _check("fetch", url, str(size), str(downloads))
    assert seen == {"native_after_first": 1, "native_after_second": 1, "same_bytes": True}
    assert os.path.getsize(downloads / "native") == size
    assert sorted(os.listdir(downloads)) == ["boto3", "native"], "no temp file is left"


@pytest.mark.parametrize("case", ["missing object", "larger than declared", "bad credentials"])
def test_native_failures_surface_as_boto3_errors_and_leave_nothing(s3, tmp_path, case):
    write_dataset(s3.root)
    url, size = _a_shard(s3.root, str(tmp_path))
    max_bytes = ""
    if case == "missing object":
        url = join_url(s3.root, "no-such-shard.mds")
    elif case == "larger than declared":
        max_bytes = str(size - 1)
    else:
        s3.break_credentials()
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    seen = _check("fail", url, max_bytes, str(downloads))
    expected = {
        "missing object": "ObjectNotFoundError",
        "larger than declared": "DownloadTooLargeError",
        "bad credentials": "CredentialsError",
    }[case]
    assert (seen["error"], seen["native"]) == (expected, 0)
    assert url in seen["message"]
    assert os.listdir(downloads) == [], "no partial file under any name"


@pytest.mark.parametrize("parent_had_a_client", [False, True])
def test_dataloader_workers_download_natively_unless_forked_from_a_native_client(s3, tmp_path, parent_had_a_client):
    write_dataset(s3.root)
    seen = _check("epoch", s3.root, str(tmp_path / "cache"), "yes" if parent_had_a_client else "no", native="auto")
    assert seen["samples"] == NUM_SAMPLES
    if parent_had_a_client:
        assert seen["at_fork"] == 1
        assert seen["worker_counts"] == [1], "a child of a process with awscrt threads must not use awscrt"
    else:
        assert seen["at_fork"] == 0, "by default the main process downloads through boto3"
        assert max(seen["worker_counts"]) > 0, "DataLoader workers download natively by default"
