"""Default-sized shards (≥ 64 MiB) through the databricks-sdk's default Files client, against the fake workspace.

The writer and the dataset go through whatever path the installed SDK takes by default; the fake workspace's
request log shows which: with the extended client (`FilesExt`, the default since databricks-sdk 0.69) a shard goes
up as a multipart upload to presigned part URLs and comes down from a presigned download URL, never as the single
`PUT /api/2.0/fs/files` of older SDKs. Also: a throttling workspace (429/503 with `Retry-After`) is waited out,
writing to a volume that does not exist names the volume, and a workspace that answers with resumable (GCP-style)
upload sessions still takes a large file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from streaming import MDSWriter, StreamingDataset
from streaming.storage import EndpointUnreachableError, ObjectNotFoundError, storage_for
from tests.services import (
    DATABRICKS_TOKEN,
    DATABRICKS_VOLUME,
    SERVERS,
    Service,
    _http_answers,
    free_port,
    start_service,
)

pytestmark = pytest.mark.services

MIB = 1 << 20
SAMPLE_BYTES = 2 * MIB
SAMPLES = 33  # one shard of 66 MiB (+ headers): above the SDK's 50 MiB multipart threshold and the 64 MiB default


@pytest.fixture
def workspace(fake_databricks: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Service:
    """The fake workspace's credentials in the environment (and nothing else of DATABRICKS_*)."""
    for name in list(os.environ):
        if name.startswith("DATABRICKS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATABRICKS_HOST", fake_databricks.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", DATABRICKS_TOKEN)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "missing-databrickscfg"))
    storage_for("dbfs:/Volumes/main/default/vol/x").reset()
    return fake_databricks


def sdk_uses_extended_files_client(service: Service) -> bool:
    """Whether this databricks-sdk's `w.files` is the extended client (multipart uploads, presigned downloads)."""
    from databricks.sdk import WorkspaceClient

    try:
        from databricks.sdk.mixins.files import FilesExt
    except ImportError:
        return False
    client = WorkspaceClient(host=service.endpoint, token=DATABRICKS_TOKEN)
    return isinstance(client.files, FilesExt) and not client.config.disable_experimental_files_api_client


def requests_for(service: Service, fragment: str) -> list[dict]:
    """The logged requests whose path or query mention `fragment`."""
    lines = Path(service.extra["request_log"]).read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    return [e for e in entries if fragment in e["path"] or fragment in json.dumps(e["query"])]


def presigned_requests(service: Service, since: int) -> list[dict]:
    lines = Path(service.extra["request_log"]).read_text().splitlines()[since:]
    return [e for e in map(json.loads, lines) if e["path"].startswith("/presigned/")]


def log_length(service: Service) -> int:
    return len(Path(service.extra["request_log"]).read_text().splitlines())


@pytest.fixture
def throttling(workspace: Service) -> Iterator[None]:
    """The workspace answers a quarter of the requests with 429/503 and `Retry-After: 1`."""
    urllib.request.urlopen(urllib.request.Request(f"{workspace.endpoint}/fake/throttle?share=0.25&retry_after=1", b""))
    try:
        yield
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{workspace.endpoint}/fake/throttle?share=0", b""))


def write_and_read_back(out: str, cache: Path) -> None:
    rng = np.random.default_rng(7)
    digests = []
    with MDSWriter(out=out, columns={"data": "bytes"}, size_limit=80 * MIB) as writer:
        for _ in range(SAMPLES):
            data = rng.bytes(SAMPLE_BYTES)
            digests.append(hashlib.sha1(data).hexdigest())
            writer.write({"data": data})
    dataset = StreamingDataset(remote=out, local=str(cache), shuffle=False, batch_size=1)
    assert [hashlib.sha1(sample["data"]).hexdigest() for sample in dataset] == digests


@pytest.mark.parametrize("spelling", ["/Volumes", "dbfs:/Volumes"])
def test_a_default_sized_shard_travels_the_sdk_default_path(workspace: Service, tmp_path: Path, spelling: str):
    folder = f"/Volumes/main/default/vol/large-{uuid.uuid4().hex[:8]}"
    out = (spelling.removesuffix("/Volumes") + folder) if spelling.startswith("dbfs:") else folder
    before = log_length(workspace)
    started = time.monotonic()
    write_and_read_back(out, tmp_path / "cache")
    elapsed = time.monotonic() - started

    shard = f"{folder}/shard.00000.mds"
    stored = Path(workspace.extra["root"]) / shard.lstrip("/")
    assert stored.stat().st_size >= 64 * MIB
    calls = [(e["method"], e["path"], e["query"].get("action"), e["status"]) for e in requests_for(workspace, shard)]
    single_puts = [c for c in calls if c[0] == "PUT" and c[2] is None]
    if sdk_uses_extended_files_client(workspace):
        assert ("POST", f"/api/2.0/fs/files{shard}", "initiate-upload", 200) in calls, calls
        assert ("POST", f"/api/2.0/fs/files{shard}", "complete-upload", 200) in calls, calls
        assert single_puts == [], "the shard went up as a single PUT, not as a multipart upload"
        assert any(c[:2] == ("POST", "/api/2.0/fs/create-download-url") and c[3] == 200 for c in calls), calls
        presigned = presigned_requests(workspace, before)
        parts = [e for e in presigned if e["method"] == "PUT" and e["status"] == 200]
        downloads = [e for e in presigned if e["method"] == "GET" and e["status"] in (200, 206)]
        assert len(parts) >= 2, "a 66 MiB shard takes several parts"
        assert sum(e["bytes_in"] for e in parts) == stored.stat().st_size
        assert downloads, "the shard was not read from a presigned URL"
        assert not any(c[0] == "GET" and c[1] == f"/api/2.0/fs/files{shard}" for c in calls)
    else:
        assert [c[3] for c in single_puts] == [204], calls
    print(f"{spelling}: 66 MiB shard written and read back in {elapsed:.1f} s")


def test_throttled_requests_are_retried_after_the_retry_after_wait(workspace: Service, throttling: None, tmp_path):
    folder = f"dbfs:/Volumes/main/default/vol/throttled-{uuid.uuid4().hex[:8]}"
    local = tmp_path / "blob.bin"
    local.write_bytes(os.urandom(MIB))
    before = log_length(workspace)
    started = time.monotonic()
    storage = storage_for(folder)
    for number in range(4):
        storage.put(str(local), f"{folder}/{number}.bin")
    listed = storage.list(folder)
    storage.get(f"{folder}/3.bin", str(tmp_path / "back.bin"))
    elapsed = time.monotonic() - started
    assert listed == [f"{folder}/{number}.bin" for number in range(4)]
    assert (tmp_path / "back.bin").read_bytes() == local.read_bytes()
    lines = Path(workspace.extra["request_log"]).read_text().splitlines()[before:]
    # Workspace API answers carry Retry-After: 1, which the SDK must wait out (presigned cloud URLs retry on their own).
    throttled = [e for e in map(json.loads, lines) if e["status"] in (429, 503) and e["path"].startswith("/api/")]
    assert throttled, "the workspace throttled nothing; the test proves nothing"
    entries = [json.loads(line) for line in lines]
    retried = 0
    for answer in throttled:
        # The same call again (the retry) must come no sooner than Retry-After, less the log's ms rounding. A
        # throttled create-download-url is not retried: the SDK falls back to a direct GET, which needs no wait.
        position = entries.index(answer)
        again = (e for e in entries[position + 1 :] if (e["method"], e["path"]) == (answer["method"], answer["path"]))
        retry = next(again, None)
        if retry is None:
            assert answer["path"].endswith("/create-download-url"), f"{answer['method']} {answer['path']} never retried"
            continue
        retried += 1
        waited = retry["time"] - answer["time"]
        assert waited >= 0.99, f"{answer['method']} {answer['path']} was retried {waited:.3f} s after a Retry-After: 1"
    assert retried, "no throttled call was retried; the test proves nothing"
    assert elapsed >= 1.0


def test_writing_to_a_missing_volume_names_it(workspace: Service, tmp_path: Path):
    local = tmp_path / "x.bin"
    local.write_bytes(b"x")
    url = "dbfs:/Volumes/main/default/novol/dir/x.bin"
    with pytest.raises(ObjectNotFoundError) as caught:
        storage_for(url).put(str(local), url)
    message = str(caught.value)
    assert url in message and "Volume 'main.default.novol' does not exist" in message
    assert DATABRICKS_TOKEN not in message


@pytest.fixture
def gcp_style_workspace(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Service]:
    """A second fake workspace that answers initiate-upload with a resumable session, as GCP workspaces do."""
    workdir = tmp_path_factory.mktemp("fake_databricks_gcp")
    port = free_port()
    request_log = workdir / "requests.jsonl"
    argv = [sys.executable, str(SERVERS / "fake_databricks.py"), str(port), str(workdir / "root"), DATABRICKS_TOKEN]
    argv += ["--volume", DATABRICKS_VOLUME, "--upload-style", "resumable", "--request-log", str(request_log)]
    service = start_service(
        "fake-databricks-gcp", argv, port, workdir, lambda: _http_answers(f"http://127.0.0.1:{port}/.well-known/x")
    )
    service.extra.update(root=workdir / "root", request_log=request_log)
    for name in list(os.environ):
        if name.startswith("DATABRICKS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATABRICKS_HOST", service.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", DATABRICKS_TOKEN)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "missing-databrickscfg"))
    yield service
    service.stop()


def test_a_large_file_reaches_a_gcp_style_workspace(gcp_style_workspace: Service, tmp_path: Path):
    url = "dbfs:/Volumes/main/default/vol/gcp/blob.bin"
    local = tmp_path / "blob.bin"
    local.write_bytes(os.urandom(60 * MIB))
    storage = storage_for(url)
    storage.put(str(local), url)
    storage.get(url, str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == local.read_bytes()
    calls = [
        (e["method"], e["query"].get("action"), e["status"]) for e in requests_for(gcp_style_workspace, "blob.bin")
    ]
    if sdk_uses_extended_files_client(gcp_style_workspace):
        # Answered with a resumable session: the SDK either uploads in Content-Range chunks or falls back to one PUT.
        assert ("POST", "initiate-upload", 200) in calls, calls
        chunks = [e for e in presigned_requests(gcp_style_workspace, 0) if e["method"] == "PUT"]
        assert chunks or ("PUT", None, 204) in calls, calls
    else:
        assert ("PUT", None, 204) in calls, calls


def test_a_workspace_that_keeps_throttling_is_reported_as_throttling(workspace: Service, tmp_path: Path):
    url = f"dbfs:/Volumes/main/default/vol/always-throttled-{uuid.uuid4().hex[:8]}.bin"
    urllib.request.urlopen(urllib.request.Request(f"{workspace.endpoint}/fake/throttle?share=1&retry_after=1", b""))
    try:
        with pytest.raises(EndpointUnreachableError) as caught:
            storage_for(url).get(url, str(tmp_path / "x.bin"), timeout=2)
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{workspace.endpoint}/fake/throttle?share=0", b""))
    message = str(caught.value)
    assert url in message and "throttling" in message and DATABRICKS_TOKEN not in message
