"""Scheme-specific configuration against the real servers: env vars, URL forms, credential errors."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from streaming.storage import CredentialsError, ObjectNotFoundError, StoragePermissionError, download_file, storage_for
from streaming.storage.url import split_url

pytestmark = pytest.mark.services


def _source(tmp_path, data: bytes = b"payload") -> str:
    path = tmp_path / "source.bin"
    path.write_bytes(data)
    return str(path)


def test_s3_standard_endpoint_variable(remote_factory, monkeypatch, tmp_path):
    s3 = remote_factory("s3")
    endpoint = os.environ.pop("S3_ENDPOINT_URL")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    url = s3.url("via-aws-endpoint.bin")
    storage_for(url).put(_source(tmp_path), url)
    assert storage_for(url).size(url) == len(b"payload")


def test_s3_anonymous_fallback_is_denied_by_a_private_bucket(remote_factory, monkeypatch, tmp_path):
    s3 = remote_factory("s3")
    url = s3.url("private.bin")
    storage_for(url).put(_source(tmp_path), url)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(CredentialsError, match="anonymous access was denied.*AWS_ACCESS_KEY_ID") as raised:
        storage_for(url).get(url, str(tmp_path / "copy.bin"))
    assert url in str(raised.value)


def test_s3_missing_bucket(remote_factory, tmp_path):
    remote_factory("s3")
    url = "s3://no-such-bucket-here/x.bin"
    with pytest.raises(ObjectNotFoundError, match="bucket 'no-such-bucket-here' does not exist"):
        storage_for(url).list("s3://no-such-bucket-here/")
    with pytest.raises(ObjectNotFoundError, match=url):
        storage_for(url).get(url, str(tmp_path / "x.bin"))


def test_s3_requester_pays_and_canned_acl_are_sent(remote_factory, monkeypatch, tmp_path):
    s3 = remote_factory("s3")
    bucket = split_url(s3.root).netloc
    monkeypatch.setenv("MOSAICML_STREAMING_AWS_REQUESTER_PAYS", f"other, {bucket}")
    monkeypatch.setenv("S3_CANNED_ACL", "private")
    url = s3.url("acl.bin")
    storage = storage_for(url)
    assert storage._requester_pays == frozenset({"other", bucket}) and storage._canned_acl == "private"
    storage.put(_source(tmp_path), url)
    download_file(url, str(tmp_path / "copy.bin"))
    assert (tmp_path / "copy.bin").read_bytes() == b"payload"


def _download_in_child(url: str, target: str) -> None:
    download_file(url, target, retry=1, timeout=10)


def test_storage_works_in_a_forked_worker(remote_factory, tmp_path):
    s3 = remote_factory("s3")
    url = s3.url("fork.bin")
    storage_for(url).put(_source(tmp_path, b"x" * 4096), url)
    storage_for(url).get(url, str(tmp_path / "parent.bin"))  # the parent's client exists before the fork
    child = multiprocessing.get_context("fork").Process(
        target=_download_in_child, args=(url, str(tmp_path / "child.bin"))
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert (tmp_path / "child.bin").read_bytes() == b"x" * 4096


def test_azure_account_host_form(remote_factory, tmp_path):
    abfss = remote_factory("abfss")
    location = split_url(abfss.root)
    container, _, host = location.netloc.partition("@")
    account = host.split(".")[0]
    blob_form = f"azure://{account}.blob.core.windows.net/{container}/{location.key}/host-form.bin"
    storage_for(blob_form).put(_source(tmp_path), blob_form)
    assert storage_for(abfss.url("host-form.bin")).exists(abfss.url("host-form.bin"))
    same_via_uploader_form = f"azure://{container}/{location.key}/host-form.bin"
    assert storage_for(same_via_uploader_form).size(same_via_uploader_form) == len(b"payload")


def test_azure_without_any_account(remote_factory, monkeypatch):
    remote_factory("azure")
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    with pytest.raises(CredentialsError, match="AZURE_ACCOUNT_NAME with AZURE_ACCOUNT_ACCESS_KEY"):
        storage_for("azure://container/x.bin").exists("azure://container/x.bin")


def test_azure_missing_container(remote_factory, tmp_path):
    remote_factory("azure")
    url = "azure://no-such-container/x.bin"
    with pytest.raises(ObjectNotFoundError, match="container 'no-such-container' does not exist"):
        storage_for(url).put(_source(tmp_path), url)


def test_oci_namespace_is_looked_up_when_omitted(remote_factory, tmp_path):
    oci = remote_factory("oci")
    bucket_at_ns = split_url(oci.root).netloc
    short = f"oci://{bucket_at_ns.partition('@')[0]}/{split_url(oci.root).key}/no-namespace.bin"
    storage_for(short).put(_source(tmp_path), short)
    assert storage_for(oci.url("no-namespace.bin")).size(oci.url("no-namespace.bin")) == len(b"payload")


def test_oci_without_config_file(remote_factory, monkeypatch, tmp_path):
    oci = remote_factory("oci")
    monkeypatch.setenv("OCI_CONFIG_FILE", str(tmp_path / "absent-config"))
    with pytest.raises(CredentialsError, match="OCI config file"):
        storage_for(oci.url("x.bin")).exists(oci.url("x.bin"))


def test_databricks_without_credentials(remote_factory, monkeypatch):
    volumes = remote_factory("volumes")
    monkeypatch.delenv("DATABRICKS_HOST")
    monkeypatch.delenv("DATABRICKS_TOKEN")
    with pytest.raises(
        CredentialsError,
        match="default auth: cannot configure default credentials.*DATABRICKS_HOST and DATABRICKS_TOKEN",
    ):
        storage_for(volumes.url("x.bin")).exists(volumes.url("x.bin"))


@pytest.mark.parametrize("scheme", ["volumes", "dbfs"])
def test_databricks_permission_denied(remote_factory, tmp_path, scheme):
    remote = remote_factory(scheme)
    url = remote.url("forbidden/x.bin")
    with pytest.raises(StoragePermissionError, match="permission denied") as raised:
        storage_for(url).put(_source(tmp_path), url)
    assert not isinstance(raised.value, CredentialsError)


def test_plain_volumes_path_uses_the_files_api(remote_factory, tmp_path, fake_databricks):
    volumes = remote_factory("volumes")
    plain = split_url(volumes.url("plain.bin")).key
    assert plain.startswith("/Volumes/")
    storage_for(plain).put(_source(tmp_path), plain)
    assert (fake_databricks.extra["root"] / plain.lstrip("/")).read_bytes() == b"payload"
    assert storage_for(volumes.url("plain.bin")).list(volumes.root) == [volumes.url("plain.bin")]
