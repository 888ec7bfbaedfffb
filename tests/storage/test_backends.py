"""Every scheme's backend against its real server: round trip, atomic download, retries, error kinds."""

from __future__ import annotations

import os
import time

import pytest

from streaming.storage import (
    CredentialsError,
    EndpointUnreachableError,
    ObjectNotFoundError,
    download_file,
    storage_for,
)

pytestmark = pytest.mark.services


def _write(path, data: bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as sink:
        sink.write(data)
    return str(path)


def _no_leftovers(directory) -> list[str]:
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def test_round_trip(remote, tmp_path):
    payloads = {"a.bin": os.urandom(3000), "sub/b.bin": b"", "sub/deeper/c.mds": os.urandom(2 << 20)}
    for name, data in payloads.items():
        url = remote.url(name)
        storage_for(url).put(_write(tmp_path / "src" / name, data), url)
    storage = storage_for(remote.root)
    assert storage.list(remote.root) == sorted(remote.url(name) for name in payloads)
    assert storage.list(remote.url("sub")) == [remote.url("sub/b.bin"), remote.url("sub/deeper/c.mds")]
    assert storage.list(remote.url("nothing-here")) == []
    for name, data in payloads.items():
        url = remote.url(name)
        assert storage.exists(url)
        assert storage.size(url) == len(data)
        target = tmp_path / "dst" / name
        storage.get(url, str(target))
        assert target.read_bytes() == data
    assert not storage.exists(remote.url("a.bin.missing"))
    storage.put(_write(tmp_path / "src" / "replacement", b"new"), remote.url("a.bin"))
    assert storage.size(remote.url("a.bin")) == 3
    storage.delete(remote.url("a.bin"))
    assert not storage.exists(remote.url("a.bin"))
    storage.delete(remote.url("a.bin"))  # deleting a missing object is not an error
    assert storage.list(remote.root) == [remote.url("sub/b.bin"), remote.url("sub/deeper/c.mds")]


def test_missing_object(remote, tmp_path):
    url = remote.url("never/written.mds")
    storage = storage_for(url)
    assert not storage.exists(url)
    with pytest.raises(ObjectNotFoundError, match="not found") as raised:
        storage.size(url)
    assert url in str(raised.value)
    target = tmp_path / "dst" / "written.mds"
    started = time.monotonic()
    with pytest.raises(ObjectNotFoundError) as raised:
        download_file(url, str(target), retry=3, initial_backoff=5.0)
    assert time.monotonic() - started < 5.0, "a missing object must not be retried"
    assert url in str(raised.value)
    assert _no_leftovers(tmp_path / "dst") == []


def test_failed_download_leaves_no_file(cloud, tmp_path):
    url = cloud.url("data.bin")
    storage_for(url).put(_write(tmp_path / "data.bin", os.urandom(4096)), url)
    cloud.unreachable()
    target = tmp_path / "dst" / "data.bin"
    with pytest.raises(EndpointUnreachableError, match="cannot reach") as raised:
        download_file(url, str(target), retry=1, timeout=1)
    assert url in str(raised.value)
    assert _no_leftovers(tmp_path / "dst") == []


def test_transient_failure_is_retried(cloud, tmp_path):
    data = os.urandom(1 << 20)
    url = cloud.url("shard.00000.mds")
    storage_for(url).put(_write(tmp_path / "shard.mds", data), url)
    proxy = cloud.through_proxy()
    proxy.fail_next(1)
    target = tmp_path / "dst" / "shard.00000.mds"
    download_file(url, str(target), retry=3, timeout=10, initial_backoff=0.01, max_jitter=0.01)
    assert target.read_bytes() == data
    assert proxy.failures == 1 and proxy.forwarded >= 1
    assert _no_leftovers(tmp_path / "dst") == ["shard.00000.mds"]


def test_outage_longer_than_retries_fails_after_backoff(cloud, tmp_path):
    url = cloud.url("x.bin")
    storage_for(url).put(_write(tmp_path / "x.bin", b"payload"), url)
    proxy = cloud.through_proxy()
    proxy.fail_next(10**6)
    started = time.monotonic()
    with pytest.raises(EndpointUnreachableError) as raised:
        download_file(url, str(tmp_path / "dst" / "x.bin"), retry=2, timeout=1, initial_backoff=0.3, max_jitter=0)
    assert time.monotonic() - started >= 0.3, "the second attempt must come after the backoff"
    assert proxy.failures >= 2, "both attempts must have reached the endpoint"
    assert url in str(raised.value)
    assert _no_leftovers(tmp_path / "dst") == []


def test_bad_credentials(cloud, tmp_path):
    url = cloud.url("secret.bin")
    source = _write(tmp_path / "secret.bin", b"payload")
    storage_for(url).put(source, url)
    cloud.break_credentials()
    from streaming.storage.registry import clear_storage_cache

    clear_storage_cache()
    with pytest.raises(CredentialsError) as raised:
        storage_for(url).get(url, str(tmp_path / "dst" / "secret.bin"), timeout=5)
    message = str(raised.value)
    assert url in message
    assert not any(secret in message for secret in _secrets())
    with pytest.raises(CredentialsError):
        storage_for(url).put(source, cloud.url("other.bin"))
    assert _no_leftovers(tmp_path / "dst") == []


def _secrets() -> set[str]:
    from tests.remotes import SECRETS
    from tests.services import AZURITE_KEY, DATABRICKS_TOKEN, S3_SECRET

    return SECRETS | {AZURITE_KEY, DATABRICKS_TOKEN, S3_SECRET}
