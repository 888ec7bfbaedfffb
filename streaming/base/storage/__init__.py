"""Upstream's import path `streaming.base.storage`: uploader and downloader classes with `.get(...)` factories."""

from streaming.base.storage.download import (
    AzureDataLakeDownloader,
    AzureDownloader,
    CloudDownloader,
    DatabricksUnityCatalogDownloader,
    DBFSDownloader,
    GCSDownloader,
    LocalDownloader,
    OCIDownloader,
    S3Downloader,
)
from streaming.base.storage.upload import (
    AzureDataLakeUploader,
    AzureUploader,
    CloudUploader,
    GCSUploader,
    LocalUploader,
    OCIUploader,
    S3Uploader,
)

__all__ = [
    "CloudUploader",
    "S3Uploader",
    "GCSUploader",
    "OCIUploader",
    "LocalUploader",
    "AzureUploader",
    "AzureDataLakeUploader",
    "CloudDownloader",
    "S3Downloader",
    "GCSDownloader",
    "OCIDownloader",
    "AzureDownloader",
    "AzureDataLakeDownloader",
    "DatabricksUnityCatalogDownloader",
    "DBFSDownloader",
    "LocalDownloader",
]

# Hugging Face, SFTP and Aliyun Drive (upstream names; alipan:// is refused with the alternatives).
from streaming.base.storage.download import AlipanDownloader, HFDownloader, SFTPDownloader
from streaming.base.storage.upload import HFUploader

__all__ += ["HFUploader", "HFDownloader", "SFTPDownloader", "AlipanDownloader"]
