"""Upstream path `streaming.base.storage.upload`: re-exports of `streaming.compat.cloud_uploaders`."""

from streaming.compat.cloud_uploaders import (
    UPLOADERS,
    AlipanUploader,
    AzureDataLakeUploader,
    AzureUploader,
    CloudUploader,
    DatabricksUnityCatalogUploader,
    DatabricksUploader,
    DBFSUploader,
    GCSAuthentication,
    GCSUploader,
    HFUploader,
    LocalUploader,
    OCIUploader,
    S3Uploader,
)

__all__ = [
    "AlipanUploader",
    "GCSAuthentication",
    "HFUploader",
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
