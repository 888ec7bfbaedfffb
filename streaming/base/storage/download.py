"""Upstream path `streaming.base.storage.download`: re-exports of `streaming.compat.cloud_downloaders`."""

from streaming.compat.cloud_downloaders import (
    BOTOCORE_CLIENT_ERROR_CODES,
    DOWNLOADER_MAPPINGS,
    AlipanDownloader,
    AzureDataLakeDownloader,
    AzureDownloader,
    CloudDownloader,
    DatabricksUnityCatalogDownloader,
    DBFSDownloader,
    GCSDownloader,
    HFDownloader,
    LocalDownloader,
    OCIDownloader,
    S3Downloader,
    SFTPDownloader,
)

__all__ = [
    "AlipanDownloader",
    "HFDownloader",
    "SFTPDownloader",
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
