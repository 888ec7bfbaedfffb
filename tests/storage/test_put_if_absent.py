"""`Storage.put_if_absent`, the create-only write the commit log relies on, on each store's real server."""

from __future__ import annotations

import pytest

from streaming.storage.errors import UnsupportedOperationError
from streaming.storage.registry import storage_for
from tests.remotes import Remote

CREATE_ONLY = ["local", "s3", "gs", "azure", "oci", "dbfs", "volumes", "fuse"]


@pytest.mark.parametrize("scheme", CREATE_ONLY)
def test_only_the_first_create_wins_and_the_object_keeps_its_bytes(scheme: str, remote_factory, tmp_path) -> None:
    remote: Remote = remote_factory(scheme)
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_bytes(b"first writer")
    second.write_bytes(b"second writer, longer")
    url = remote.url("_mds_log/00000000000000000001.json")
    storage = storage_for(url)
    assert storage.put_if_absent(str(first), url) is True
    assert storage.put_if_absent(str(second), url) is False
    storage.get(url, str(tmp_path / "read"))
    assert (tmp_path / "read").read_bytes() == b"first writer"


@pytest.mark.parametrize("scheme", ["hf", "sftp"])
def test_stores_without_a_create_only_write_say_so(scheme: str, remote_factory, tmp_path) -> None:
    remote: Remote = remote_factory(scheme)
    local = tmp_path / "commit"
    local.write_bytes(b"{}")
    url = remote.url("_mds_log/00000000000000000001.json")
    with pytest.raises(UnsupportedOperationError, match="no create-only write"):
        storage_for(url).put_if_absent(str(local), url)
