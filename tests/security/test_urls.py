"""Issue 15, item 9: URLs and splits cannot leave their prefix; /Volumes goes to Databricks only when it must."""

from __future__ import annotations

import pytest

from streaming import Stream
from streaming.storage.registry import _route, storage_for
from streaming.storage.url import split_url

LEAVING = [
    "s3://bucket/../other/key",
    "s3://bucket/a//b",
    "s3://bucket/./key",
    "gs://bucket/a/../../b",
    "azure://container/../other/blob",
    "oci://bucket/../x",
    "dbfs:/Volumes/c/s/v/../../../w/x/y",
    "dbfs:/tmp/../x",
    "/Volumes/c/s/v/../../w/x",
]


@pytest.mark.parametrize("url", LEAVING)
def test_dot_and_empty_segments_are_refused_up_front(url):
    with pytest.raises(ValueError, match="empty, '.' or '..' path segment"):
        storage_for(url)


@pytest.mark.parametrize("url", ["s3://bucket/key", "s3://bucket/prefix/", "gs://b", "dbfs:/Volumes/c/s/v/x"])
def test_plain_urls_still_route(url):
    _route(url)


@pytest.mark.parametrize("split", ["../../p", "/abs", "a/../../b", "./x"])
def test_a_split_cannot_escape(split, tmp_path):
    with pytest.raises(ValueError, match="must be a relative folder inside the dataset"):
        Stream(remote="s3://bucket/ds", local=str(tmp_path), split=split)


def test_file_urls_with_a_host_are_refused():
    with pytest.raises(ValueError, match="names host 'host'"):
        split_url("file://host/path")
    assert split_url("file:///path").key == "/path"
    assert split_url("file://localhost/path").key == "/path"


def test_volumes_routing(tmp_path, monkeypatch):
    monkeypatch.delenv("MDS_STREAMING_VOLUMES", raising=False)
    assert _route("/Volumes/c/s/v/ds/index.json")[0] == "volumes"  # the shape of a volume, not present here
    assert _route("/Volumes/c/s")[0] == "local"  # too short to be a volume
    assert _route("/Volumes/Macintosh HD")[0] == "local"
    monkeypatch.setenv("MDS_STREAMING_VOLUMES", "local")
    assert _route("/Volumes/c/s/v/ds/index.json")[0] == "local"
