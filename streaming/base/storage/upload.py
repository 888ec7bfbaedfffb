"""Upstream path `streaming.base.storage.upload`: re-exports of `streaming.storage.uploaders`."""

from streaming.storage.uploaders import (
    UPLOADERS,
    AzureDataLakeUploader,
    AzureUploader,
    CloudUploader,
    DatabricksUnityCatalogUploader,
    DatabricksUploader,
    DBFSUploader,
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
    "AzureUploader",
    "AzureDataLakeUploader",
    "DatabricksUploader",
    "DatabricksUnityCatalogUploader",
    "DBFSUploader",
    "LocalUploader",
    "UPLOADERS",
]
