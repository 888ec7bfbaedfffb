"""MosaicML Streaming's uploader classes (served at `streaming.base.storage.upload`), over `Storage` backends.

`CloudUploader.get(out, ...)` picks the class for the scheme of `out` (or of `out[1]` for a pair); every
class uploads through the same `Storage` backend, so they differ only in which URLs they accept. A new
scheme is one subclass naming its `schemes` plus its entries in `UPLOADERS`. Each uploader is also a
`ShardSink` (``streaming.format.sink``), so it can be given to a writer: uploads are synchronous.
"""

from __future__ import annotations

import os
import shutil
from enum import Enum

from streaming.compat import destination_checks as checks
from streaming.storage.download import PERMANENT
from streaming.storage.out_argument import local_directory, parse_out
from streaming.storage.registry import refuse_unsupported, storage_for
from streaming.storage.retry import call_with_retry
from streaming.storage.scratch import keep_scratch, remove_scratch
from streaming.storage.url import join_url, split_url

__all__ = [
    "CloudUploader",
    "S3Uploader",
    "GCSUploader",
    "OCIUploader",
    "AzureUploader",
    "AzureDataLakeUploader",
    "DatabricksUploader",
    "DatabricksUnityCatalogUploader",
    "DBFSUploader",
    "LocalUploader",
    "UPLOADERS",
]


def _uploader_key(remote: str | None) -> str:
    if not remote:
        return ""
    location = split_url(remote)
    if location.scheme == "dbfs" and location.key.startswith("/Volumes"):
        return "dbfs:/Volumes"
    return location.scheme


class CloudUploader:
    """Upload files written under `local` to `remote` (synchronously; see `ShardUploader` for background uploads).

    Attributes: `local`, `remote` (None when local-only), `keep_local`, `progress_bar`, `retry`.
    """

    schemes: tuple[str, ...] = ()

    @classmethod
    def get(
        cls,
        out: str | tuple[str, str],
        keep_local: bool = False,
        progress_bar: bool = False,
        retry: int = 2,
        exist_ok: bool = False,
    ) -> CloudUploader:
        """The uploader for the scheme of `out` (a directory, a URL, or a `(local, remote)` pair)."""
        remote = parse_out(out).remote
        key = _uploader_key(remote)
        if key not in UPLOADERS:
            raise ValueError(
                f"Invalid Cloud provider prefix: {key!r} in {remote!r}. "
                f"Valid choices: {', '.join(repr(k) for k in sorted(UPLOADERS))}."
            )
        return UPLOADERS[key](out, keep_local=keep_local, progress_bar=progress_bar, retry=retry, exist_ok=exist_ok)

    def __init__(
        self,
        out: str | tuple[str, str],
        keep_local: bool = False,
        progress_bar: bool = False,
        retry: int = 2,
        exist_ok: bool = False,
    ) -> None:
        local, remote = parse_out(out)
        if remote is not None and _uploader_key(remote) not in self.schemes:
            raise ValueError(
                f"{type(self).__name__} cannot upload to {remote!r}; it accepts "
                f"{', '.join(repr(s) for s in self.schemes)} URLs."
            )
        # Without a local part the files are staged in a scratch folder, which a SIGKILLed process cannot leak.
        self._staged_in_scratch = local is None
        self.local = local_directory(local, exist_ok=exist_ok, clear=False)
        if self._staged_in_scratch and keep_local:  # files asked to be kept outlive this process, as upstream's do
            keep_scratch(self.local)
        self.remote = remote
        self.keep_local = keep_local
        self.progress_bar = progress_bar
        self.retry = retry

    def upload_file(self, filename: str) -> None:
        """Upload `local/filename` to `remote/filename` (with `retry` total attempts), then `clear_local` it."""
        local_path = os.path.join(self.local, filename)
        if self.remote is None:
            return
        url = join_url(self.remote, filename)
        call_with_retry(lambda: storage_for(url).put(local_path, url), self.retry, permanent=PERMANENT)
        self.clear_local(local_path)

    def list_objects(self, prefix: str | None = None) -> list[str]:
        """Names of the remote objects whose path below `remote` starts with `prefix` (local files if no remote)."""
        if self.remote is None:
            found = [os.path.join(d, f) for d, _, files in os.walk(self.local) for f in files]
            return sorted(p for p in found if os.path.relpath(p, self.local).startswith(prefix or ""))
        folder, _, start = (prefix or "").rpartition("/")
        base = join_url(self.remote, folder) if folder else self.remote
        names = []
        for url in storage_for(base).list(base):
            relative = url[len(base.rstrip("/")) + 1 :]
            if relative.startswith(start):
                names.append(split_url(url).key)
        return names

    def clear_local(self, local: str) -> None:
        """Delete the uploaded local file unless `keep_local`."""
        if not self.keep_local and os.path.isfile(local):
            os.remove(local)

    # -- the ShardSink protocol, for writers given this uploader ----------------------------------
    def upload(self, basename: str) -> None:
        """Upload a completed file at once (from the writer's shard thread)."""
        self.upload_file(basename)

    def finish(self, index_basename: str) -> None:
        """Every file was uploaded by `upload` as it came; publish the index last, then drop the local folder
        unless `keep_local`."""
        self.upload_file(index_basename)
        if self.remote is None or self.keep_local:
            return
        if self._staged_in_scratch:
            remove_scratch(self.local)
        else:
            shutil.rmtree(self.local, ignore_errors=True)

    def abort(self, error: BaseException) -> None:
        """Nothing runs in the background; the remote is left without a new index, the local files are kept."""
        if self._staged_in_scratch:  # kept for good: no later sweep may take them
            keep_scratch(self.local)


class S3Uploader(CloudUploader):
    """`s3://` (any S3-compatible endpoint)."""

    schemes = ("s3",)

    def check_bucket_exists(self, remote: str) -> None:
        """Raise FileNotFoundError if the bucket of `remote` does not exist."""
        checks.check_bucket_exists(remote, "bucket")


class GCSUploader(CloudUploader):
    """`gs://`."""

    schemes = ("gs",)

    def check_bucket_exists(self, remote: str) -> None:
        """Raise FileNotFoundError if the bucket of `remote` does not exist."""
        checks.check_bucket_exists(remote, "bucket")


class OCIUploader(CloudUploader):
    """`oci://bucket@namespace/...`."""

    schemes = ("oci",)

    def check_bucket_exists(self, remote: str) -> None:
        """Raise FileNotFoundError if the bucket of `remote` does not exist."""
        checks.check_bucket_exists(remote, "bucket")


class AzureUploader(CloudUploader):
    """`azure://`, `abfs://`, `abfss://` (through the Blob API)."""

    schemes = ("azure", "abfs", "abfss")

    def check_bucket_exists(self, remote: str) -> None:
        """Raise FileNotFoundError if the bucket of `remote` does not exist."""
        checks.check_bucket_exists(remote, "bucket")


class AzureDataLakeUploader(CloudUploader):
    """`azure-dl://`."""

    schemes = ("azure-dl",)

    def check_container_exists(self, remote: str) -> None:
        """Raise FileNotFoundError if the container (file system) of `remote` does not exist."""
        checks.check_bucket_exists(remote, "container")


class DatabricksUploader(CloudUploader):
    """Any Databricks path: `dbfs:/Volumes/...` (Files API) or `dbfs:/...` (DBFS API)."""

    schemes: tuple[str, ...] = ("dbfs:/Volumes", "dbfs")


class DatabricksUnityCatalogUploader(DatabricksUploader):
    """`dbfs:/Volumes/<catalog>/<schema>/<volume>/...`."""

    schemes = ("dbfs:/Volumes",)


class DBFSUploader(DatabricksUploader):
    """`dbfs:/...` outside `/Volumes`."""

    schemes = ("dbfs",)

    def check_folder_exists(self) -> None:
        """Raise FileNotFoundError if the DBFS folder `remote` does not exist."""
        checks.check_folder_exists(self.remote or "")


class LocalUploader(CloudUploader):
    """A local directory, optionally copied to another local directory."""

    schemes = ("", "file")


class HFUploader(CloudUploader):
    """`hf://datasets/<org>/<repo>/...`: a Hugging Face dataset repository, one commit per file (`HF_TOKEN`)."""

    schemes = ("hf",)

    def check_dataset_exists(self) -> None:
        """Raise FileNotFoundError if the dataset repository does not exist (or is not visible with the token)."""
        checks.check_dataset_exists(self.remote or "")


class AlipanUploader(CloudUploader):
    """`alipan://`: not supported; constructing one raises ValueError naming the stores to use instead."""

    schemes = ("alipan",)

    def __init__(
        self,
        out: str | tuple[str, str],
        keep_local: bool = False,
        progress_bar: bool = False,
        retry: int = 2,
        exist_ok: bool = False,
    ) -> None:
        refuse_unsupported(parse_out(out).remote or "alipan:///")

    def check_token(self) -> None:
        """Upstream checks its Aliyun Drive token here; alipan:// is refused."""
        refuse_unsupported("alipan:///")

    def list_objects(self, prefix: str | None = None) -> list[str]:
        """Refused: alipan:// is not supported."""
        refuse_unsupported("alipan:///")
        return []

    def upload_file(self, filename: str) -> None:
        """Refused: alipan:// is not supported."""
        refuse_unsupported("alipan:///")


class GCSAuthentication(Enum):
    """How upstream's GCS uploader authenticates: HMAC keys (`GCS_KEY`/`GCS_SECRET`) or a service account."""

    HMAC = 1
    SERVICE_ACCOUNT = 2


UPLOADERS: dict[str, type[CloudUploader]] = {
    "s3": S3Uploader,
    "gs": GCSUploader,
    "oci": OCIUploader,
    "azure": AzureUploader,
    "abfs": AzureUploader,
    "abfss": AzureUploader,
    "azure-dl": AzureDataLakeUploader,
    "dbfs:/Volumes": DatabricksUnityCatalogUploader,
    "dbfs": DBFSUploader,
    "": LocalUploader,
    "file": LocalUploader,
    "hf": HFUploader,
    "alipan": AlipanUploader,
}
