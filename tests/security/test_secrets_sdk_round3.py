"""Issue 34, deliver 5's last piece: the scrubber on databricks-sdk's own failing presigned requests.

databricks-sdk downloads and uploads volume files through presigned cloud-storage URLs it asks the workspace for
(``create-download-url``, ``create-upload-part-urls``). The workspace stand-in (`tests/servers/fake_databricks.py`)
signs them as S3 does with an STS session (``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token`` in
the query) and, through ``/fake/storage``, refuses every download through them (403 ``AccessDenied``) and through
the workspace host (the SDK's fallback), so the download fails. What the package raises (its storage error, the
cause chain, the command line's error line) and what is logged at INFO and above (ours and the SDK's own) may hold
no signature, credential or token. The SDK's and urllib3's DEBUG wire logs print every URL they request: those
are other libraries' own logging, outside this package (docs/security.md).
"""

from __future__ import annotations

import json
import logging
import urllib.request

import pytest

from streaming.cli.console import error_line
from streaming.storage.errors import StoragePermissionError
from streaming.storage.registry import storage_for
from tests.security.test_secrets import _everything_printed

VOLUME = "dbfs:/Volumes/main/default/vol"


def _control(service, **values: int) -> None:
    query = "&".join(f"{name}={value}" for name, value in values.items())
    with urllib.request.urlopen(urllib.request.Request(f"{service.endpoint}/fake/storage?{query}", b"")) as answer:
        json.loads(answer.read())


def _issued_secrets(service) -> set[str]:
    """Every signature, credential and session token the workspace put in the presigned URLs it handed out."""
    found = set()
    for line in service.extra["request_log"].read_text().splitlines():
        entry = json.loads(line)
        if entry["server"] == "storage":
            found.update(entry["query"].get(name, "") for name in ("X-Amz-Signature", "X-Amz-Security-Token"))
            found.add(entry["query"].get("X-Amz-Credential", "").split("/")[0])
    return {secret for secret in found if secret}


@pytest.fixture
def refusing_storage(fake_databricks, credential_free_environment, monkeypatch):
    """The workspace refusing every download: through presigned URLs (403 AccessDenied) and directly."""
    monkeypatch.setenv("DATABRICKS_TOKEN", fake_databricks.extra["token"])
    monkeypatch.setenv("DATABRICKS_HOST", fake_databricks.endpoint)
    _control(fake_databricks, deny_downloads=1, deny_direct=1)
    yield fake_databricks
    _control(fake_databricks, deny_downloads=0, deny_direct=0)


def test_a_failed_presigned_download_leaves_no_signature_or_token(refusing_storage, tmp_path, caplog):
    fake_databricks = refusing_storage
    (fake_databricks.extra["root"] / "Volumes/main/default/vol").mkdir(parents=True, exist_ok=True)
    (fake_databricks.extra["root"] / "Volumes/main/default/vol/shard.mds").write_bytes(b"x" * 1000)
    caplog.set_level(logging.INFO)
    url = f"{VOLUME}/shard.mds"
    with pytest.raises(StoragePermissionError) as info:
        storage_for(url).get(url, str(tmp_path / "shard.mds"), timeout=5)
    printed = _everything_printed(info.value) + error_line("cp", f"{type(info.value).__name__}: {info.value}")
    logged = "".join(record.getMessage() for record in caplog.records)
    secrets = _issued_secrets(fake_databricks)
    assert secrets, "the SDK fetched no presigned URL: nothing was tested"
    assert "AccessDenied" in logged  # the SDK tried the presigned URL and said so
    for secret in secrets:
        assert secret not in printed, secret
        assert secret not in logged, secret
