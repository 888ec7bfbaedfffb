"""Upstream path `streaming.base.storage.download`: re-exports of `streaming.storage.downloaders`."""

from streaming.storage.downloaders import (
    BOTOCORE_CLIENT_ERROR_CODES,
    DOWNLOADER_MAPPINGS,
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
