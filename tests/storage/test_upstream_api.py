"""Upstream's `streaming.base.storage` classes and factories, over the real S3 server and local disk."""

from __future__ import annotations

import os

import pytest

from streaming.base.storage import (
    AzureUploader,
    CloudDownloader,
    CloudUploader,
    DatabricksUnityCatalogDownloader,
    DBFSDownloader,
    LocalDownloader,
    LocalUploader,
    S3Downloader,
    S3Uploader,
)
from streaming.base.storage.upload import UPLOADERS, DatabricksUnityCatalogUploader

pytestmark = pytest.mark.services


def test_factories_pick_by_scheme(tmp_path):
    assert type(CloudUploader.get(str(tmp_path / "a"))) is LocalUploader
    assert type(CloudUploader.get((str(tmp_path / "b"), "s3://bucket/x"))) is S3Uploader
    assert type(CloudUploader.get((str(tmp_path / "c"), "abfss://c@acct.dfs.core.windows.net/x"))) is AzureUploader
    assert type(CloudUploader.get((str(tmp_path / "d"), "dbfs:/Volumes/c/s/v/x"))) is DatabricksUnityCatalogUploader
    assert type(CloudDownloader.get(None)) is LocalDownloader
    assert type(CloudDownloader.get("s3://bucket/x")) is S3Downloader
    assert type(CloudDownloader.get("dbfs:/Volumes/c/s/v/x")) is DatabricksUnityCatalogDownloader
    assert type(CloudDownloader.get("dbfs:/tmp/x")) is DBFSDownloader
    assert set(UPLOADERS) >= {"s3", "gs", "oci", "azure", "azure-dl", "dbfs:/Volumes", "dbfs", ""}


def test_invalid_arguments(tmp_path):
    with pytest.raises(ValueError, match="Invalid Cloud provider prefix: 'ftp'"):
        CloudUploader.get((str(tmp_path / "a"), "ftp://host/x"))
    with pytest.raises(ValueError, match="pair"):
        CloudUploader.get(("a", "b", "c"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Unsupported remote path: 'ftp://host/x'"):
        CloudDownloader.get("ftp://host/x")
    with pytest.raises(ValueError, match="S3Downloader cannot download 'gs://b/x'"):
        S3Downloader().download("gs://b/x", str(tmp_path / "x"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        CloudUploader.get(str(tmp_path / "full"))
    assert CloudUploader.get(str(tmp_path / "full"), exist_ok=True).local == str(tmp_path / "full")


def test_upload_list_and_download_over_s3(remote_factory, tmp_path):
    s3 = remote_factory("s3")
    local = tmp_path / "local"
    uploader = CloudUploader.get((str(local), s3.root), retry=1)
    for name in ("shard.00000.mds", "shard.00001.mds", "index.json"):
        (local / name).write_bytes(name.encode())
        uploader.upload_file(name)
    assert os.listdir(local) == [], "keep_local=False deletes each file after its upload"
    key_root = s3.root.split("/", 3)[3]
    assert uploader.list_objects() == [
        f"{key_root}/index.json",
        f"{key_root}/shard.00000.mds",
        f"{key_root}/shard.00001.mds",
    ]
    assert uploader.list_objects("shard.") == [f"{key_root}/shard.00000.mds", f"{key_root}/shard.00001.mds"]
    target = tmp_path / "copy" / "index.json"
    CloudDownloader.direct_download(s3.url("index.json"), str(target))
    assert target.read_bytes() == b"index.json"
    target.write_bytes(b"kept")
    CloudDownloader.get(s3.root).download(s3.url("index.json"), str(target))
    assert target.read_bytes() == b"kept", "an existing local file is not downloaded again"
    with pytest.raises(ValueError, match="remote path must be provided"):
        LocalDownloader().download(None, str(tmp_path / "absent"))
