"""Azure Blob Storage for `azure://`, `azure-dl://`, `abfs://` and `abfss://` URLs, through azure-storage-blob.

URL meanings (all read and written through the Blob API, which ADLS Gen2 accounts serve too):
* `azure://<container>/<blob>` and `azure-dl://<filesystem>/<path>`: upstream's uploader form; the
  account comes from `AZURE_ACCOUNT_NAME` (or the connection string).
* `azure://<account>.blob.core.windows.net/<container>/<blob>` (a dotted netloc, or one equal to
  `AZURE_ACCOUNT_NAME`): upstream's downloader form, where the container is the first path segment.
* `abfss://<container>@<account>.dfs.core.windows.net/<path>` (and `abfs://`).

Credentials: `AZURE_STORAGE_CONNECTION_STRING` when its account matches; else the account key from
`AZURE_ACCOUNT_ACCESS_KEY` (or `AZURE_STORAGE_ACCOUNT_KEY`); else azure-identity's
`DefaultAzureCredential` (Azure CLI, managed identity, environment service principal, ...).
azure-storage-blob's sync client is used directly (it is what adlfs wraps), with short SDK-level retries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from streaming._extras import require
from streaming.storage.base import DEFAULT_TIMEOUT, ClientPool, Storage
from streaming.storage.errors import (
    CredentialsError,
    EndpointUnreachableError,
    ObjectNotFoundError,
    StorageError,
    StoragePermissionError,
)
from streaming.storage.url import split_url

CREDENTIAL_HINT = (
    "AZURE_ACCOUNT_NAME with AZURE_ACCOUNT_ACCESS_KEY, or AZURE_STORAGE_CONNECTION_STRING, "
    "or sign in for DefaultAzureCredential (e.g. `az login`)"
)


@dataclass(frozen=True)
class BlobLocation:
    """Where a URL points: account (None = from the environment), container, blob name, and the URL root."""

    account: str | None
    container: str
    blob: str
    root: str


def _env_account() -> str | None:
    return os.environ.get("AZURE_ACCOUNT_NAME") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or None


def parse_blob_url(url: str) -> BlobLocation:
    """Split an Azure URL into account, container and blob, following the meanings in the module doc."""
    location = split_url(url)
    if location.scheme in ("abfs", "abfss"):
        container, _, host = location.netloc.partition("@")
        account = host.split(".")[0] if host else None
        return BlobLocation(account, container, location.key, f"{location.scheme}://{location.netloc}/")
    if location.scheme == "azure" and ("." in location.netloc or location.netloc == _env_account()):
        container, _, blob = location.key.partition("/")
        return BlobLocation(location.netloc.split(".")[0], container, blob, f"azure://{location.netloc}/{container}/")
    return BlobLocation(None, location.netloc, location.key, f"{location.scheme}://{location.netloc}/")


def _code(exc: Exception) -> str:
    code = getattr(exc, "error_code", None)
    return str(getattr(code, "value", code) or type(exc).__name__)


def _connection_string_account(connection_string: str) -> str | None:
    for part in connection_string.split(";"):
        name, _, value = part.partition("=")
        if name.strip().lower() == "accountname":
            return value.strip()
    return None


class AzureStorage(Storage):
    """One Azure storage account; one client per (process, timeout), shared by threads."""

    env_vars = (
        "AZURE_STORAGE_CONNECTION_STRING",
        "AZURE_ACCOUNT_NAME",
        "AZURE_STORAGE_ACCOUNT_NAME",
        "AZURE_ACCOUNT_ACCESS_KEY",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
    )

    def __init__(
        self, *, account: str | None, connection_string: str | None = None, account_key: str | None = None
    ) -> None:
        self.account = account
        self._connection_string = connection_string
        self._account_key = account_key
        self._clients = ClientPool(self._build_client)

    @classmethod
    def from_url(cls, url: str) -> AzureStorage:
        account = parse_blob_url(url).account or _env_account()
        connection_string = os.environ.get("AZURE_STORAGE_CONNECTION_STRING") or None
        if connection_string and account and _connection_string_account(connection_string) != account:
            connection_string = None
        if connection_string and not account:
            account = _connection_string_account(connection_string)
        key = os.environ.get("AZURE_ACCOUNT_ACCESS_KEY") or os.environ.get("AZURE_STORAGE_ACCOUNT_KEY") or None
        return cls(account=account, connection_string=connection_string, account_key=key)

    @staticmethod
    def cache_key(url: str) -> str:
        return parse_blob_url(url).account or ""

    def _build_client(self, timeout: float) -> Any:
        blob = require("azure.storage.blob", "azure", "Azure Blob Storage")
        options = {
            "connection_timeout": min(timeout, 10.0),
            "read_timeout": timeout,
            "retry_policy": blob.LinearRetry(backoff=0.5, random_jitter_range=0.25, retry_total=2),
        }
        if self._connection_string:
            return blob.BlobServiceClient.from_connection_string(self._connection_string, **options)
        credential: Any = self._account_key
        if credential is None:
            credential = require("azure.identity", "azure", "Azure Blob Storage").DefaultAzureCredential()
        return blob.BlobServiceClient(
            account_url=f"https://{self.account}.blob.core.windows.net", credential=credential, **options
        )

    def _blob_client(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        location = self._locate(url)
        return self._clients.get(timeout).get_blob_client(container=location.container, blob=location.blob)

    def _locate(self, url: str) -> BlobLocation:
        if not self.account:
            raise CredentialsError(url, f"no Azure storage account is known for this URL; set {CREDENTIAL_HINT}")
        location = parse_blob_url(url)
        if not location.container:
            raise ValueError(
                f"{url!r} names no container; expected azure://<container>/<path> or "
                "abfss://<container>@<account>.dfs.core.windows.net/<path>"
            )
        return location

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        stream = self._blob_client(url, timeout).download_blob(max_concurrency=1)
        stream.readinto(sink)
        return stream.size

    def _upload(self, local_path: str, url: str) -> None:
        with open(local_path, "rb") as source:
            self._blob_client(url).upload_blob(source, overwrite=True, length=os.path.getsize(local_path))

    def _upload_if_absent(self, local_path: str, url: str) -> bool:
        from azure.core.exceptions import ResourceExistsError

        with open(local_path, "rb") as source:
            try:
                self._blob_client(url).upload_blob(source, overwrite=False, length=os.path.getsize(local_path))
            except ResourceExistsError:
                return False
        return True

    def _list(self, prefix_url: str) -> Iterator[str]:
        location = self._locate(prefix_url)
        prefix = location.blob.strip("/") + "/" if location.blob.strip("/") else ""
        container = self._clients.get(DEFAULT_TIMEOUT).get_container_client(location.container)
        for item in container.list_blobs(name_starts_with=prefix):
            yield location.root + item.name

    def _size(self, url: str) -> int | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return int(self._blob_client(url).get_blob_properties().size)
        except ResourceNotFoundError:
            return None

    def _modified(self, url: str) -> float | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return self._blob_client(url).get_blob_properties().last_modified.timestamp()
        except ResourceNotFoundError:
            return None

    def _delete(self, url: str) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            self._blob_client(url).delete_blob()
        except ResourceNotFoundError:
            pass

    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        from azure.core import exceptions as aze

        account = self.account or "(unknown account)"
        if isinstance(exc, aze.ResourceNotFoundError):
            location = parse_blob_url(url)
            if _code(exc) == "ContainerNotFound":
                return ObjectNotFoundError(
                    url,
                    f"container {location.container!r} does not exist in account {account!r}; check the container name",
                )
            return self._not_found(url)
        rejected = (
            isinstance(exc, aze.HttpResponseError)
            and exc.status_code == 403
            and (
                _code(exc) in ("AuthenticationFailed", "InvalidAuthenticationInfo")
                or "failed to authenticate" in str(exc.message).lower()
            )
        )
        if isinstance(exc, aze.ClientAuthenticationError) or rejected:
            return CredentialsError(
                url, f"account {account!r} rejected the credentials ({_code(exc)}); check {CREDENTIAL_HINT}"
            )
        if isinstance(exc, aze.HttpResponseError) and exc.status_code == 403:
            return StoragePermissionError(
                url,
                f"access denied ({_code(exc)}); check that the "
                f"credentials may access this container in account {account!r}",
            )
        if isinstance(exc, (aze.ServiceRequestError, aze.ServiceResponseError)):
            endpoint = (
                "the connection string's BlobEndpoint"
                if self._connection_string
                else f"https://{account}.blob.core.windows.net"
            )
            return EndpointUnreachableError(
                url,
                f"cannot reach {endpoint} ({type(exc).__name__}); check the "
                "account name, AZURE_STORAGE_CONNECTION_STRING and the network",
            )
        return None
