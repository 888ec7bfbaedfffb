"""Storage: one backend per URL scheme behind one small interface (`Storage`), chosen by one public registry
(`register_backend`, `storage_for`), plus the shard uploader and downloader, the parser of a writer's `out`,
and `DatasetRoot`, a dataset root addressed by relative paths. (`vacuum` needs the index schema, so it lives in
the format layer: `streaming.format.vacuum`, or `streaming.vacuum`.)

Cloud SDKs are imported only when a URL of their scheme is first used.
"""

from __future__ import annotations

from streaming.storage.base import Storage
from streaming.storage.download import download_file
from streaming.storage.errors import (
    CredentialsError,
    EndpointUnreachableError,
    IncompleteTransferError,
    ObjectNotFoundError,
    StorageError,
    StoragePermissionError,
)
from streaming.storage.registry import clear_storage_cache, register_backend, registered_schemes, storage_for
from streaming.storage.retry import retry
from streaming.storage.shard_uploader import ShardUploader
from streaming.storage.url import is_remote, join_url

__all__ = [
    "Storage",
    "register_backend",
    "registered_schemes",
    "storage_for",
    "clear_storage_cache",
    "download_file",
    "retry",
    "is_remote",
    "join_url",
    "StorageError",
    "ObjectNotFoundError",
    "StoragePermissionError",
    "CredentialsError",
    "EndpointUnreachableError",
    "IncompleteTransferError",
    "ShardUploader",
]
