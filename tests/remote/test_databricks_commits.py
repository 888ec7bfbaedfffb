"""Commits to a volume under throttling, on whatever databricks-sdk this interpreter has: every byte, or a refusal.

The SDK lanes (`make test-databricks-sdks`) run this file on the SDKs the runtimes ship (0.20.0 on DBR 15.4 LTS,
0.30.0 on 16.4 LTS, 0.1.6 on 14.3 LTS) and on the newest. Before databricks-sdk 0.38 a throttled PUT was sent again
with its body already read, which stored an empty file; a commit file must never be stored empty or short. An SDK
without the Files API must be refused with the command that upgrades it, never with an AttributeError.
"""

from __future__ import annotations

import os
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.spark.executor_access import check_executor_access
from streaming.storage.errors import UnsupportedOperationError
from streaming.storage.registry import exclusive_storage_for, storage_for
from tests.services import DATABRICKS_TOKEN, Service

pytestmark = pytest.mark.services
COMMITS = 4


def _has_files_api() -> bool:
    from databricks.sdk import WorkspaceClient

    return hasattr(WorkspaceClient, "files")


@pytest.fixture
def throttled_workspace(fake_databricks: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Service]:
    """The fake workspace's credentials; it answers every second request 429/503 with `Retry-After: 1`."""
    for name in list(os.environ):
        if name.startswith("DATABRICKS_") or name.startswith("MDS_STREAMING_DATABRICKS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATABRICKS_HOST", fake_databricks.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", DATABRICKS_TOKEN)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "missing-databrickscfg"))
    _throttle(fake_databricks, "share=0.5&retry_after=1")
    try:
        yield fake_databricks
    finally:
        _throttle(fake_databricks, "share=0")


def _throttle(service: Service, query: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{service.endpoint}/fake/throttle?{query}", b""))


def _stored(service: Service, url: str) -> bytes:
    """The bytes the workspace holds for `url`, read from its disk (not through the SDK under test)."""
    path = url.removeprefix("dbfs:")
    return (Path(service.extra["root"]) / path.lstrip("/")).read_bytes()


@pytest.mark.parametrize("spelling", ["/Volumes", "dbfs:/Volumes", "dbfs:"])
def test_throttled_commits_store_every_byte(throttled_workspace: Service, tmp_path: Path, spelling: str):
    folder = f"{spelling}/main/default/vol/commits-{uuid.uuid4().hex[:8]}"
    if spelling == "dbfs:":
        folder = f"dbfs:/tmp/commits-{uuid.uuid4().hex[:8]}"
    elif not _has_files_api():
        pytest.fail("this lane's SDK has no Files API: test_an_sdk_without_the_files_api_is_refused covers it")
    for number in range(1, COMMITS + 1):
        body = (f'{{"commit": {number}, "padding": "' + "x" * 5000 * number + '"}').encode()
        local = tmp_path / f"commit-{number}"
        local.write_bytes(body)
        url = f"{folder}/_mds_log/{number:020d}.json"
        storage = exclusive_storage_for(url)
        assert storage.put_if_absent(str(local), url) is True
        assert _stored(throttled_workspace, url) == body, f"commit {number} is not what was sent"
        assert storage.put_if_absent(str(tmp_path / "commit-1"), url) is False
        assert _stored(throttled_workspace, url) == body
        # An overwrite (index.json) under the same throttling.
        index_url = f"{folder}/index.json"
        storage_for(index_url).put(str(local), index_url)
        assert _stored(throttled_workspace, index_url) == body


def test_an_sdk_without_the_files_api_is_refused(throttled_workspace: Service, tmp_path: Path):
    """0.1.6 (DBR 14.3 LTS) has no `WorkspaceClient.files`: a volume write names the upgrade; newer SDKs write."""
    url = f"/Volumes/main/default/vol/refused-{uuid.uuid4().hex[:8]}/_mds_log/{1:020d}.json"
    local = tmp_path / "commit"
    local.write_bytes(b'{"commit": 1}')
    storage = storage_for(url)
    if _has_files_api():
        check_executor_access(url, None)
        assert storage.put_if_absent(str(local), url) is True
        return
    # The converters' check on the driver, before any Spark task, and the write itself.
    for attempt in (lambda: check_executor_access(url, None), lambda: storage.put_if_absent(str(local), url)):
        with pytest.raises(UnsupportedOperationError) as caught:
            attempt()
        message = str(caught.value)
        assert url in message and "%pip install -U databricks-sdk" in message and "no Files API" in message
    assert not (Path(throttled_workspace.extra["root"]) / url.lstrip("/")).exists()
