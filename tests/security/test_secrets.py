"""Issue 15, item 7: no credential in our errors, their cause chains, or our logs."""

from __future__ import annotations

import logging
import traceback

import pytest

from streaming.storage.download import download_file
from streaming.storage.registry import storage_for
from streaming.storage.secrets import scrub
from tests.services import free_port


def _everything_printed(err: BaseException) -> str:
    chain, seen = [], err
    while seen is not None:
        chain.append(repr(seen))
        chain.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return "".join(traceback.format_exception(err)) + "".join(chain)


def test_scrub():
    assert scrub("cannot reach http://KEY:SECRET@host:9/x and s3://a:b@c") == (
        "cannot reach http://KEY:***@host:9/x and s3://a:***@c"
    )
    assert scrub("http://host/x") == "http://host/x"


def test_gcs_emulator_password(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://user:hunter2@127.0.0.1:{free_port()}")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(OSError) as info:
        download_file("gs://bucket/x", str(tmp_path / "x"), retry=2, timeout=0.5, initial_backoff=0, max_jitter=0)
    assert "hunter2" not in _everything_printed(info.value)
    assert "127.0.0.1" in str(info.value)
    assert caplog.records and not [r for r in caplog.records if "hunter2" in r.getMessage()]


def test_s3_endpoint_credentials_leave_no_trace(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("S3_ENDPOINT_URL", f"http://AKIAEXAMPLE:s3cr3tvalue@127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3tvalue")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    caplog.set_level(logging.INFO, logger="streaming")
    with pytest.raises(OSError) as info:
        storage_for("s3://bucket/x").get("s3://bucket/x", str(tmp_path / "x"), timeout=1)
    assert "s3cr3tvalue" not in _everything_printed(info.value)
    assert not [r for r in caplog.records if "s3cr3tvalue" in r.getMessage()]


def test_databricks_host_password_reaches_no_log(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("DATABRICKS_HOST", f"http://admin:pa55word@127.0.0.1:{free_port()}")
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-not-a-real-token")
    for name in ("DATABRICKS_CONFIG_PROFILE", "DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(OSError) as info:
        storage_for("dbfs:/Volumes/c/s/v/x").get("dbfs:/Volumes/c/s/v/x", str(tmp_path / "x"), timeout=1)
    assert "pa55word" not in _everything_printed(info.value)
    assert not [r for r in caplog.records if "pa55word" in r.getMessage()]
