"""hf:// and sftp:// specifics against their real loopback servers (the shared suites cover the common contract):
Hub pagination, revisions, private repositories and the endpoint's own headers; SFTP passwords, host keys, key
files, absolute paths and atomic uploads; URL validation, missing extras, and refused alipan://."""

from __future__ import annotations

import os
import sys

import pytest

from streaming.storage import CredentialsError, ObjectNotFoundError, download_file, storage_for
from streaming.storage.registry import clear_storage_cache
from streaming.storage.retry import call_with_retry
from tests.remotes import Remote
from tests.servers.hub_and_sftp import known_hosts_line

pytestmark = pytest.mark.services


def _source(tmp_path, data: bytes, name: str = "source.bin") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


# -- hf:// --------------------------------------------------------------------------------------------------------
def _api(hub):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub.endpoint, token=hub.extra["token"])


def test_hf_listing_follows_the_hub_pages(remote_factory, tmp_path):
    hf = remote_factory("hf")
    from tests.servers.hub_and_sftp import HF_PAGE_SIZE

    names = [f"shard.{i:05d}.mds" for i in range(3 * HF_PAGE_SIZE + 2)]
    source = _source(tmp_path, b"x")
    for name in names:
        storage_for(hf.url(name)).put(source, hf.url(name))
    assert storage_for(hf.root).list(hf.root) == [hf.url(name) for name in names]


def test_hf_revision_in_the_url_reads_that_commit(remote_factory, request, tmp_path):
    hf = remote_factory("hf")
    hub = request.getfixturevalue("fake_hf_hub")
    url = hf.url("data.bin")
    storage_for(url).put(_source(tmp_path, b"first"), url)
    first_commit = _api(hub).dataset_info(hub.extra["repo"]).sha
    storage_for(url).put(_source(tmp_path, b"second"), url)
    pinned = url.replace(f"/{hub.extra['repo']}/", f"/{hub.extra['repo']}@{first_commit}/")
    storage_for(pinned).get(pinned, str(tmp_path / "pinned.bin"))
    storage_for(url).get(url, str(tmp_path / "latest.bin"))
    assert (tmp_path / "pinned.bin").read_bytes() == b"first"
    assert (tmp_path / "latest.bin").read_bytes() == b"second"
    missing = url.replace(f"/{hub.extra['repo']}/", f"/{hub.extra['repo']}@{'0' * 40}/")
    with pytest.raises(ObjectNotFoundError, match="revision '0{40}'"):
        storage_for(missing).get(missing, str(tmp_path / "never.bin"))


def test_hf_resolve_answers_like_the_hub(remote_factory, request, tmp_path):
    """The endpoint's metadata and ranges, through huggingface_hub's own readers (what hf_hub_download relies on)."""
    from huggingface_hub import HfFileSystem, get_hf_file_metadata, hf_hub_url

    hf = remote_factory("hf")
    hub = request.getfixturevalue("fake_hf_hub")
    data = os.urandom(10_000)
    url = hf.url("ranged.bin")
    storage_for(url).put(_source(tmp_path, data), url)
    path = url.split(hub.extra["repo"] + "/", 1)[1]
    file_url = hf_hub_url(hub.extra["repo"], path, repo_type="dataset", endpoint=hub.endpoint)
    metadata = get_hf_file_metadata(file_url, token=hub.extra["token"])
    assert metadata.size == len(data)
    assert metadata.commit_hash == _api(hub).dataset_info(hub.extra["repo"]).sha
    assert metadata.etag == _api(hub).get_paths_info(hub.extra["repo"], [path], repo_type="dataset")[0].blob_id
    fs = HfFileSystem(endpoint=hub.endpoint, token=hub.extra["token"])
    with fs.open(f"datasets/{hub.extra['repo']}/{path}", "rb", block_size=1000) as remote_file:
        remote_file.seek(7_000)
        assert remote_file.read(1_500) == data[7_000:8_500]


def test_hf_private_repository_needs_the_token(remote_factory, request, monkeypatch, tmp_path):
    hf = remote_factory("hf")
    hub = request.getfixturevalue("fake_hf_hub")
    _api(hub).create_repo("mds-org/private-data", repo_type="dataset", private=True, exist_ok=True)
    url = "hf://datasets/mds-org/private-data/x/data.bin"
    storage_for(url).put(_source(tmp_path, b"private"), url)
    assert storage_for(url).size(url) == len(b"private")
    monkeypatch.delenv("HF_TOKEN")
    clear_storage_cache()
    with pytest.raises(ObjectNotFoundError, match="dataset repository 'mds-org/private-data' not found.*HF_TOKEN"):
        storage_for(url).get(url, str(tmp_path / "dst" / "data.bin"))
    with pytest.raises(ObjectNotFoundError, match="HF_TOKEN"):  # the Hub does not reveal that it exists
        storage_for(url).put(_source(tmp_path, b"anonymous"), url)
    public = hf.url("anonymous.bin")
    with pytest.raises(CredentialsError, match="401"):  # a public repository may be read, not written
        storage_for(public).put(_source(tmp_path, b"anonymous"), public)
    assert not (tmp_path / "dst").exists() or os.listdir(tmp_path / "dst") == []


def test_hf_missing_repository_and_bad_urls(remote_factory, tmp_path):
    remote_factory("hf")
    with pytest.raises(ObjectNotFoundError, match="dataset repository 'mds-org/no-such-data' not found"):
        storage_for("hf://datasets/mds-org/no-such-data/x").list("hf://datasets/mds-org/no-such-data/x")
    assert not storage_for("hf://datasets/mds-org/no-such-data/x").exists("hf://datasets/mds-org/no-such-data/x")
    for bad in ("hf://models/org/repo/x", "hf://datasets/only-org"):
        with pytest.raises(ValueError, match=r"expected hf://datasets/<org>/<repo>/<path>"):
            storage_for(bad).get(bad, str(tmp_path / "x"))


def test_hf_uploader_checks_its_dataset(remote_factory, tmp_path):
    from streaming.base.storage import HFUploader

    hf = remote_factory("hf")
    HFUploader((str(tmp_path / "a"), hf.root)).check_dataset_exists()
    uploader = HFUploader((str(tmp_path / "b"), "hf://datasets/mds-org/no-such-data/x"))
    with pytest.raises(FileNotFoundError, match="^The HF dataset mds-org/no-such-data could not be found"):
        uploader.check_dataset_exists()


# -- sftp:// ------------------------------------------------------------------------------------------------------
def _sftp(remote_factory, request) -> tuple[Remote, object]:
    return remote_factory("sftp"), request.getfixturevalue("sftp_server")


def test_sftp_url_path_is_absolute_and_uploads_are_atomic(remote_factory, request, tmp_path):
    sftp, server = _sftp(remote_factory, request)
    url = sftp.url("deep/er/shard.00000.mds")
    storage_for(url).put(_source(tmp_path, b"v1"), url)
    storage_for(url).put(_source(tmp_path, b"version 2"), url)  # replaces in place
    on_disk = server.extra["root"] / url.split("/", 3)[3]
    assert on_disk.read_bytes() == b"version 2"
    assert sorted(os.listdir(on_disk.parent)) == ["shard.00000.mds"], "no temporary upload is left behind"


def test_sftp_reconnects_after_the_connection_drops(remote_factory, tmp_path):
    """A retry without `reset()` (as the shard uploader's) gets a new connection, not the dead one."""
    sftp = remote_factory("sftp")
    url = sftp.url("x.bin")
    storage = storage_for(url)
    storage.put(_source(tmp_path, b"before"), url)
    sftp.proxies[0].fail_next(0)  # cut the open connection (new ones still go through)
    source = _source(tmp_path, b"after the cut")
    call_with_retry(lambda: storage.put(source, url), 2, initial_backoff=0.2, max_jitter=0)
    assert storage.size(url) == len(b"after the cut")


def test_sftp_password_in_the_url(remote_factory, request, monkeypatch, tmp_path):
    sftp, server = _sftp(remote_factory, request)
    monkeypatch.delenv("COMPOSER_SFTP_KEY_FILE")
    password = server.extra["password"]
    with_password = sftp.root.replace("tester@", f"tester:{password}@")
    url = with_password + "/data.bin"
    storage_for(url).put(_source(tmp_path, b"by password"), url)
    assert storage_for(url).list(with_password) == [url]
    download_file(url, str(tmp_path / "copy.bin"))
    assert (tmp_path / "copy.bin").read_bytes() == b"by password"
    wrong = url.replace(password, "not-the-Password-99")
    with pytest.raises(CredentialsError, match="rejected the credentials of user 'tester'") as raised:
        download_file(wrong, str(tmp_path / "dst" / "copy.bin"), retry=3, initial_backoff=5)
    message = str(raised.value)
    assert "not-the-Password-99" not in message and password not in message
    assert "tester:***@127.0.0.1" in message
    from streaming.dataset.stream import Stream

    assert password not in repr(Stream(remote=with_password, local=str(tmp_path / "cache")))
    assert not (tmp_path / "dst").exists() or os.listdir(tmp_path / "dst") == []


def test_sftp_unknown_host_key_is_refused(remote_factory, request, monkeypatch, tmp_path):
    sftp, server = _sftp(remote_factory, request)
    url = sftp.url("x.bin")
    storage_for(url).put(_source(tmp_path, b"x"), url)
    port = int(sftp.root.split(":")[2].split("/")[0])
    other_port = known_hosts_line(server, port).replace(str(port), str(port + 1))
    (tmp_path / "known_hosts").write_text(other_port)  # the server's key, but for another port
    clear_storage_cache()
    with pytest.raises(CredentialsError, match="host key of 127.0.0.1:.* is unknown.*COMPOSER_SFTP_KNOWN_HOSTS_FILE"):
        storage_for(url).get(url, str(tmp_path / "dst" / "x.bin"))
    assert os.listdir(tmp_path / "dst") == []


def test_sftp_missing_key_file(remote_factory, monkeypatch, tmp_path):
    sftp = remote_factory("sftp")
    monkeypatch.setenv("COMPOSER_SFTP_KEY_FILE", str(tmp_path / "no-such-key"))
    with pytest.raises(CredentialsError, match="COMPOSER_SFTP_KEY_FILE names .*no-such-key.*does not exist"):
        storage_for(sftp.root).list(sftp.root)


def test_sftp_bad_urls(tmp_path):
    with pytest.raises(ValueError, match="^If specifying a URI, the URI must include the hostname"):
        storage_for("sftp:///data/x").get("sftp:///data/x", str(tmp_path / "x"))
    with pytest.raises(ValueError, match="^Query and fragment parameters are not supported"):
        storage_for("sftp://host/data/x?version=2").get("sftp://host/data/x?version=2", str(tmp_path / "x"))


# -- both, and the schemes that are not served -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [("hf://datasets/org/repo/x", "huggingface_hub", "hf"), ("sftp://user@127.0.0.1:1/x", "paramiko", "sftp")],
)
def test_missing_sdk_names_the_extra(url, module, extra, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(ImportError, match=f'pip install (-e )?"[^"]+\\[{extra}\\]"'):
        download_file(url, str(tmp_path / "x"))


def test_alipan_is_refused_with_the_alternatives(tmp_path):
    from streaming.base.storage import AlipanDownloader, CloudDownloader
    from streaming.base.storage.upload import AlipanUploader, CloudUploader

    alternatives = r"alipan://\) is not supported.*s3://.*sftp://.*hf://datasets/"
    with pytest.raises(ValueError, match=alternatives):
        storage_for("alipan:///data/x")
    downloader = CloudDownloader.get("alipan:///data/x")
    assert isinstance(downloader, AlipanDownloader)
    with pytest.raises(ValueError, match=alternatives):
        downloader.download("alipan:///data/x", str(tmp_path / "x"))
    with pytest.raises(ValueError, match=alternatives):
        CloudUploader.get((str(tmp_path / "out"), "alipan:///data"))
    with pytest.raises(ValueError, match=alternatives):
        AlipanUploader("alipan:///data")


def test_urls_lose_only_their_password():
    from streaming.storage.url import without_password

    assert without_password("sftp://bob:s%40cret@host:2222/data") == "sftp://bob:***@host:2222/data"
    for unchanged in ("sftp://bob@host/data", "s3://bucket/key", "abfss://c@acct.dfs.core.windows.net/x", "/tmp/[x"):
        assert without_password(unchanged) == unchanged
