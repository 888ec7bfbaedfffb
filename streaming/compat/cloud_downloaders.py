"""MosaicML Streaming's downloader classes (served at `streaming.base.storage.download`), over `Storage`.

`CloudDownloader.get(remote_dir)` picks the class for the scheme; all of them download atomically through
the scheme's `Storage` backend. A new scheme is one subclass naming its `identifiers` (`DOWNLOADER_MAPPINGS`
collects them). Unlike upstream, `file://` URLs are accepted as local paths.
"""

from __future__ import annotations

import os
from abc import ABC

from streaming.storage.registry import storage_for
from streaming.storage.url import split_url

__all__ = [
    "CloudDownloader",
    "S3Downloader",
    "GCSDownloader",
    "OCIDownloader",
    "AzureDownloader",
    "AzureDataLakeDownloader",
    "DatabricksUnityCatalogDownloader",
    "DBFSDownloader",
    "LocalDownloader",
    "DOWNLOADER_MAPPINGS",
    "BOTOCORE_CLIENT_ERROR_CODES",
]

BOTOCORE_CLIENT_ERROR_CODES = {"403", "404", "NoSuchKey"}


def _downloader_key(remote: str | None) -> str:
    if not remote:
        return ""
    location = split_url(remote)
    if location.scheme == "dbfs" and location.key.startswith("/Volumes"):
        return "dbfs-uc"
    return location.scheme


class CloudDownloader(ABC):  # noqa: B024 - upstream's base class is an ABC; ours has no abstract method
    """Download remote files to local paths."""

    identifiers: tuple[str, ...] = ()

    @classmethod
    def get(cls, remote_dir: str | None = None) -> CloudDownloader:
        """The downloader for the scheme of `remote_dir` (`LocalDownloader` for None or a local path)."""
        key = _downloader_key(remote_dir)
        if key not in DOWNLOADER_MAPPINGS:
            raise ValueError(
                f"Unsupported remote path: {remote_dir!r}. Valid schemes: "
                f"{', '.join(repr(k) for k in sorted(DOWNLOADER_MAPPINGS))}."
            )
        return DOWNLOADER_MAPPINGS[key]()

    @classmethod
    def direct_download(cls, remote: str, local: str, timeout: float = 60.0) -> None:
        """Download one file with a fresh downloader."""
        downloader = cls.get(remote)
        try:
            downloader.download(remote, local, timeout)
        finally:
            downloader.clean_up()

    def download(self, remote: str | None, local: str, timeout: float = 60.0) -> None:
        """Download `remote` to `local` atomically; a no-op when `local` already exists."""
        if os.path.exists(local):
            return
        if not remote:
            raise ValueError("In the absence of a local copy, a remote path must be provided.")
        key = _downloader_key(remote)
        if key not in self.identifiers:
            raise ValueError(
                f"{type(self).__name__} cannot download {remote!r}; it accepts "
                f"{', '.join(repr(i) for i in self.identifiers)} paths."
            )
        os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        storage_for(remote).get(remote, local, timeout=timeout)
        self._last = remote

    def clean_up(self) -> None:
        """Drop the clients used so far; the next download reconnects."""
        last = getattr(self, "_last", None)
        if last is not None:
            storage_for(last).reset()


class S3Downloader(CloudDownloader):
    identifiers = ("s3",)


class GCSDownloader(CloudDownloader):
    identifiers = ("gs",)


class OCIDownloader(CloudDownloader):
    identifiers = ("oci",)


class AzureDownloader(CloudDownloader):
    identifiers = ("azure", "abfs", "abfss")


class AzureDataLakeDownloader(CloudDownloader):
    identifiers = ("azure-dl",)


class DatabricksUnityCatalogDownloader(CloudDownloader):
    identifiers = ("dbfs-uc",)


class DBFSDownloader(CloudDownloader):
    identifiers = ("dbfs",)


class LocalDownloader(CloudDownloader):
    identifiers = ("", "file")


class HFDownloader(CloudDownloader):
    """`hf://datasets/<org>/<repo>/<path>` (`HF_TOKEN`, `HF_ENDPOINT`)."""

    identifiers = ("hf",)


class SFTPDownloader(CloudDownloader):
    """`sftp://[user[:password]@]host[:port]/path` (`COMPOSER_SFTP_KEY_FILE`, `COMPOSER_SFTP_KNOWN_HOSTS_FILE`)."""

    identifiers = ("sftp",)


class AlipanDownloader(CloudDownloader):
    """`alipan://`: not supported; a download raises ValueError naming the stores to use instead."""

    identifiers = ("alipan",)


DOWNLOADER_MAPPINGS: dict[str, type[CloudDownloader]] = {
    key: downloader for downloader in CloudDownloader.__subclasses__() for key in downloader.identifiers
}
