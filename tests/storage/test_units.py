"""Server-free parts of the storage layer: retry, URLs, routing, errors, atomic downloads."""

from __future__ import annotations

import os
import time
from typing import BinaryIO

import pytest

from streaming._extras import install_command
from streaming.storage import ObjectNotFoundError, registry, retry, storage_for
from streaming.storage.azure import parse_blob_url
from streaming.storage.base import ClientPool, Storage
from streaming.storage.errors import StorageError
from streaming.storage.local import LocalStorage
from streaming.storage.registry import register_backend, registered_schemes, volume_mount
from streaming.storage.url import is_remote, join_url, relative_to, split_url


class TestRetry:
    def test_counts_total_attempts_and_backs_off(self):
        calls, cleanups = [], []

        @retry(num_attempts=3, initial_backoff=0.02, max_jitter=0, clean_up_fn=lambda: cleanups.append(1))
        def flaky() -> str:
            calls.append(time.monotonic())
            if len(calls) < 3:
                raise OSError("transient")
            return "ok"

        assert flaky() == "ok"
        assert len(calls) == 3 and len(cleanups) == 2
        assert calls[1] - calls[0] >= 0.02 and calls[2] - calls[1] >= 0.04

    def test_gives_up_after_num_attempts(self):
        calls = []

        @retry(num_attempts=2, initial_backoff=0, max_jitter=0)
        def always_fails() -> None:
            calls.append(1)
            raise KeyError("boom")

        with pytest.raises(KeyError):
            always_fails()
        assert len(calls) == 2

    def test_only_retries_the_given_exception(self):
        calls = []

        @retry(ValueError, num_attempts=5, initial_backoff=0)
        def wrong_kind() -> None:
            calls.append(1)
            raise TypeError("not retried")

        with pytest.raises(TypeError):
            wrong_kind()
        assert calls == [1]

    def test_bare_decorator_and_validation(self):
        @retry
        def fine(x: int) -> int:
            return x + 1

        assert fine(1) == 2
        with pytest.raises(ValueError, match="num_attempts"):
            retry(num_attempts=0)


class TestUrls:
    def test_split(self):
        assert split_url("s3://bucket/a/b.mds") == split_url("S3://bucket/a/b.mds")
        assert split_url("s3://bucket/a/b.mds").key == "a/b.mds"
        assert split_url("dbfs:/Volumes/c/s/v/x").key == "/Volumes/c/s/v/x"
        assert split_url("/tmp/data").key == "/tmp/data"
        assert split_url("file:///tmp/data").key == "/tmp/data"
        assert split_url("oci://bucket@ns/k").netloc == "bucket@ns"

    def test_join_and_relative(self):
        assert join_url("s3://b/root/", "x/y.mds") == "s3://b/root/x/y.mds"
        assert join_url("dbfs:/Volumes/c/s/v", "a") == "dbfs:/Volumes/c/s/v/a"
        assert join_url("/tmp/root", "x/y") == os.path.join("/tmp/root", "x", "y")
        assert relative_to("gs://b/root/x/y", "gs://b/root") == "x/y"
        with pytest.raises(ValueError, match="not below"):
            relative_to("gs://b/other/x", "gs://b/root")

    def test_is_remote(self):
        assert is_remote("s3://b/k") and is_remote("dbfs:/x") and is_remote("abfss://c@a.dfs.core.windows.net/p")
        assert not is_remote("/tmp/x") and not is_remote("file:///tmp/x") and not is_remote("C:\\data")

    def test_azure_url_meanings(self, monkeypatch):
        monkeypatch.delenv("AZURE_ACCOUNT_NAME", raising=False)
        uploader_form = parse_blob_url("azure://cont/dir/blob")
        assert (uploader_form.account, uploader_form.container, uploader_form.blob) == (None, "cont", "dir/blob")
        downloader_form = parse_blob_url("azure://acct.blob.core.windows.net/cont/dir/blob")
        assert (downloader_form.account, downloader_form.container, downloader_form.blob) == (
            "acct",
            "cont",
            "dir/blob",
        )
        abfss = parse_blob_url("abfss://cont@acct.dfs.core.windows.net/dir/blob")
        assert (abfss.account, abfss.container, abfss.blob) == ("acct", "cont", "dir/blob")
        datalake = parse_blob_url("azure-dl://fs/dir/blob")
        assert (datalake.account, datalake.container, datalake.blob) == (None, "fs", "dir/blob")
        monkeypatch.setenv("AZURE_ACCOUNT_NAME", "acct")
        named = parse_blob_url("azure://acct/cont/blob")
        assert (named.account, named.container, named.blob) == ("acct", "cont", "blob")


class TestRouting:
    def test_backend_per_scheme(self, monkeypatch):
        from streaming.storage.azure import AzureStorage
        from streaming.storage.databricks import DBFSStorage, VolumesStorage
        from streaming.storage.gcs import GCSStorage
        from streaming.storage.local import LocalStorage
        from streaming.storage.oci import OCIStorage
        from streaming.storage.s3 import S3Storage

        expected = {
            "/tmp/x": LocalStorage,
            "file:///tmp/x": LocalStorage,
            "s3://b/k": S3Storage,
            "gs://b/k": GCSStorage,
            "azure://c/k": AzureStorage,
            "azure-dl://c/k": AzureStorage,
            "abfss://c@a.dfs.core.windows.net/k": AzureStorage,
            "oci://b@ns/k": OCIStorage,
            "dbfs:/tmp/k": DBFSStorage,
            "dbfs:/Volumes/c/s/v/k": VolumesStorage,
            "/Volumes/c/s/v/k": VolumesStorage,
        }
        for url, kind in expected.items():
            assert type(storage_for(url)) is kind, url
        assert volume_mount("/Volumes/c/s/v/k") is None

    def test_cached_per_environment_and_process(self, monkeypatch):
        first = storage_for("s3://b/k")
        assert storage_for("s3://b/other") is first
        monkeypatch.setenv("S3_ENDPOINT_URL", "http://127.0.0.1:1")
        assert storage_for("s3://b/k") is not first

    def test_gcs_hmac_keys_use_the_s3_api(self, monkeypatch):
        from streaming.storage.s3 import S3Storage

        monkeypatch.setenv("GCS_KEY", "hmac-key")
        monkeypatch.setenv("GCS_SECRET", "hmac-secret")
        storage = storage_for("gs://bucket/key")
        assert isinstance(storage, S3Storage) and storage.scheme == "gs"
        assert "hmac" not in repr(storage)

    def test_unknown_scheme_lists_valid_ones(self):
        with pytest.raises(ValueError, match=r"unknown scheme 'ftp'.*s3://.*dbfs:/"):
            storage_for("ftp://host/x")

    def test_missing_extra_names_the_pip_command(self, monkeypatch):
        monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))
        register_backend("nosdk", "a_module_that_is_not_installed:Backend", extra="s3")
        with pytest.raises(ImportError, match=r'nosdk://b/k.*pip install (-e )?"[^"]+\[s3\]"'):
            storage_for("nosdk://b/k")

    def test_a_registered_backend_serves_its_scheme(self, monkeypatch, tmp_path):
        monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))

        class Mirror(LocalStorage):
            """Serves mirror://<path> from the local path."""

            def _download(self, url, sink, timeout):
                return super()._download(url.replace("mirror://", "/", 1), sink, timeout)

        register_backend("mirror", Mirror)
        assert "mirror" in registered_schemes()
        (tmp_path / "f").write_bytes(b"data")
        storage_for(f"mirror://{tmp_path}/f").get(f"mirror://{tmp_path}/f", str(tmp_path / "copy"))
        assert (tmp_path / "copy").read_bytes() == b"data"
        with pytest.raises(ValueError, match="clobber=True"):
            register_backend("mirror", LocalStorage)
        with pytest.raises(TypeError, match="Storage subclass"):
            register_backend("other", object)  # type: ignore[arg-type]


class HalfThenFail(Storage):
    """A backend whose transfer breaks after writing some bytes (as a dropped connection would)."""

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        sink.write(b"partial bytes")
        raise ConnectionResetError("peer reset the connection")

    def _upload(self, local_path, url):
        raise NotImplementedError

    def _list(self, prefix_url):
        return iter(())

    def _size(self, url):
        return 100

    def _delete(self, url):
        pass

    def _classify(self, exc, url) -> StorageError | None:
        return None


class ShortRead(HalfThenFail):
    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        sink.write(b"12345")
        return 10


class TestAtomicGet:
    def test_broken_transfer_leaves_nothing(self, tmp_path):
        target = tmp_path / "dst" / "shard.mds"
        with pytest.raises(ConnectionResetError):
            HalfThenFail().get("x://shard.mds", str(target))
        assert os.listdir(tmp_path / "dst") == []

    def test_short_transfer_is_an_error(self, tmp_path):
        target = tmp_path / "shard.mds"
        with pytest.raises(StorageError, match="expected 10 bytes, received 5"):
            ShortRead().get("x://shard.mds", str(target))
        assert os.listdir(tmp_path) == []

    def test_existing_file_survives_a_failed_download(self, tmp_path):
        target = tmp_path / "shard.mds"
        target.write_bytes(b"old complete copy")
        with pytest.raises(ConnectionResetError):
            HalfThenFail().get("x://shard.mds", str(target))
        assert target.read_bytes() == b"old complete copy"
        assert os.listdir(tmp_path) == ["shard.mds"]

    def test_local_missing_file(self, tmp_path):
        with pytest.raises(ObjectNotFoundError, match="no such file"):
            storage_for(str(tmp_path / "missing")).get(str(tmp_path / "missing"), str(tmp_path / "copy"))
        assert os.listdir(tmp_path) == []


def test_client_pool_rebuilds_in_a_forked_child():
    import multiprocessing

    pool = ClientPool(lambda: object())
    parent_client = pool.get()
    assert pool.get() is parent_client
    reader, writer = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=lambda: writer.send(pool.get() is parent_client))
    child.start()
    child.join(30)
    assert reader.recv() is False
    assert child.exitcode == 0


def test_sdks_are_imported_only_for_their_scheme(tmp_path):
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from streaming.storage import storage_for, download_file\n"
        f"open({str(tmp_path / 'a')!r}, 'w').write('x')\n"
        f"download_file({str(tmp_path / 'a')!r}, {str(tmp_path / 'b')!r})\n"
        "storage_for('s3://bucket/key'); storage_for('gs://bucket/key'); storage_for('oci://b@ns/k')\n"
        "storage_for('azure://c/k'); storage_for('dbfs:/Volumes/c/s/v/k')\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'google', 'azure', 'oci',"
        " 'databricks', 'torch')]\n"
        "assert not loaded, loaded\n"
        "sys.modules['boto3'] = None\n"
        "try:\n"
        "    storage_for('s3://bucket/key').exists('s3://bucket/key')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    assert result.returncode == 0, result.stderr
    assert install_command("s3") in result.stdout
