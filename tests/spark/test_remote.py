"""Conversions straight into S3, GCS, Azure and Databricks (DBFS and Volumes) test servers, on both Spark modes.

The executors get the servers' endpoints and test credentials through ``executor_env`` (the Spark JVMs
started before the servers). Each dataset is read back with ``StreamingDataset`` from its remote.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from streaming.spark import dataframe_to_mds
from streaming.storage.registry import storage_for
from streaming.storage.url import relative_to
from tests.remotes import CREDENTIAL_PREFIXES

# Every scheme on the classic session; on Spark Connect (same executor code) the S3 and Volumes ones.
CASES = [("classic", scheme) for scheme in ("s3", "gs", "azure", "dbfs", "volumes")] + [
    ("connect", "s3"),
    ("connect", "volumes"),
]
SIZE_LIMIT = 8 * 1024
# The session is picked by parameter (request.getfixturevalue), which the suite's marking cannot see.
pytestmark = [pytest.mark.spark, pytest.mark.services]


@pytest.fixture(autouse=True)
def isolated_environment(credential_free_environment: None) -> Iterator[None]:
    """These tests run without the machine's credentials (see `credential_free_environment`)."""
    yield


def storage_env() -> dict[str, str]:
    """The storage settings the test configured in this process, for the executors."""
    extra = ("STORAGE_EMULATOR_HOST", "AWS_EC2_METADATA_DISABLED", "NO_GCE_CHECK")
    return {name: value for name, value in os.environ.items() if name.startswith(CREDENTIAL_PREFIXES) or name in extra}


@pytest.mark.parametrize("mode, scheme", CASES)
def test_conversion_into_remote_storage(mode, scheme, request, remote_factory, tmp_path, private_tempdir):
    session = request.getfixturevalue("spark" if mode == "classic" else "connect")
    remote = remote_factory(scheme)
    frame = session.range(0, 400, 1, 2).selectExpr(
        "id", "sha2(CAST(id AS STRING), 256) AS digest", "array(CAST(id AS FLOAT), CAST(-id AS FLOAT)) AS pair"
    )
    result = dataframe_to_mds(frame, remote.root, size_limit=SIZE_LIMIT, progress=False, executor_env=storage_env())
    assert result.samples == 400 and result.shards > 4
    assert 0 < result.peak_local_bytes <= 4 * SIZE_LIMIT

    storage = storage_for(remote.root)
    listed = {relative_to(url, remote.root) for url in storage.list(remote.root)}
    local_index = str(tmp_path / "index.json")
    storage.get(remote.url("index.json"), local_index)
    with open(local_index, encoding="utf-8") as file:
        shards = json.load(file)["shards"]
    basenames = {shard["zip_data"]["basename"] for shard in shards}
    attempt_indexes = {name.rsplit("/", 1)[0] + "/index.json" for name in basenames}
    top_level = {"index.json", "mds_conversion.json", "_mds_log/00000000000000000001.json", "_mds_log/index.json"}
    assert listed == basenames | attempt_indexes | top_level

    from streaming import StreamingDataset

    dataset = StreamingDataset(remote=remote.root, local=str(tmp_path / "cache"))
    samples = sorted((dataset[i] for i in range(len(dataset))), key=lambda sample: int(sample["id"]))
    assert [int(sample["id"]) for sample in samples] == list(range(400))
    for sample in samples[::37]:
        number = int(sample["id"])
        assert sample["pair"].tolist() == [float(number), float(-number)]
        assert len(sample["digest"]) == 64
