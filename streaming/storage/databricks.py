"""Databricks storage through databricks-sdk: Unity Catalog volumes (Files API) and DBFS (DBFS API).

* `dbfs:/Volumes/<catalog>/<schema>/<volume>/...` and `/Volumes/...` use the Files API when the volume is
  not mounted here (a mounted volume is read with plain file I/O; see `storage_for`).
* `dbfs:/<path>` uses the DBFS API.

Credentials follow the SDK's default chain: `DATABRICKS_HOST` + `DATABRICKS_TOKEN`, a profile
(`DATABRICKS_CONFIG_PROFILE` in `~/.databrickscfg` or `DATABRICKS_CONFIG_FILE`), OAuth M2M
(`DATABRICKS_CLIENT_ID`/`DATABRICKS_CLIENT_SECRET`), or the notebook/job context. Each thread gets its
own `WorkspaceClient`; the SDK's own retry window is bounded by the call's timeout.

Every request the SDK sends to the workspace goes through this machine's budget for it
(`streaming.storage.workspace_budget`): the workspace's limits hold for all of a job's processes, not per client.
Presigned URLs (cloud storage, where the SDK sends multipart parts and large downloads) are outside it, as they are
outside the workspace's limits. An upload that the SDK gives up on after its own retries (a part cloud storage kept
failing, a connection lost) is sent again whole, up to `UPLOAD_ATTEMPTS` times: it overwrites, so a repeat is safe.

The runtimes ship older SDKs (databricks-sdk 0.20.0 on DBR 15.4 LTS, 0.30.0 on 16.4 LTS, 0.1.6 on 14.3 LTS;
docs/support-matrix.md). Before `REWINDING_SDK` the SDK retries a throttled request with the file object it was
given, already read to its end, so a retried upload would store an empty file: those SDKs are handed the body as
bytes, which every retry sends whole. An SDK without the Files API (`WorkspaceClient.files`) cannot write a volume
at all: `require_files_api` refuses it, naming the upgrade.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from streaming._extras import require
from streaming.storage import workspace_budget
from streaming.storage.base import CHUNK_SIZE, DEFAULT_TIMEOUT, ClientPool, Storage
from streaming.storage.errors import (
    CredentialsError,
    EndpointUnreachableError,
    IncompleteTransferError,
    ObjectNotFoundError,
    RequestRejectedError,
    StorageError,
    StoragePermissionError,
    UnsupportedOperationError,
)
from streaming.storage.retry import call_with_retry
from streaming.storage.url import split_url

AUTH_HINT = (
    "set DATABRICKS_HOST and DATABRICKS_TOKEN, or DATABRICKS_CONFIG_PROFILE naming a profile in "
    "~/.databrickscfg, or run inside a Databricks notebook or job"
)
DBFS_READ_LIMIT = 1 << 20
#: Whole-upload attempts: the SDK's own part retries end with its retry window, which a busy executor uses up
#: sooner (three once lost an upload in CI: eight tasks on two loaded cores, one failed part in 23).
UPLOAD_ATTEMPTS = 5
#: The first databricks-sdk whose retries send a request's body again from its start.
REWINDING_SDK = (0, 38)
SDK_UPGRADE = "%pip install -U databricks-sdk"


def sdk_version() -> tuple[int, ...]:
    """The installed databricks-sdk's version as numbers (0.20.0 -> (0, 20, 0))."""
    from databricks.sdk.version import __version__

    return tuple(int(part) for part in re.findall(r"\d+", __version__)[:3])


def require_files_api(url: str) -> None:
    """Raise `UnsupportedOperationError` naming the upgrade if this databricks-sdk has no Files API to write `url`.

    A mounted volume's commits go through the Files API on Databricks (`exclusive_storage_for`), so the converters call
    this on the driver before any task starts.
    """
    refusal = _no_files_api(url)
    if refusal is not None:
        raise refusal


def _no_files_api(url: str) -> UnsupportedOperationError | None:
    """The refusal for `url` if this databricks-sdk has no Files API (`WorkspaceClient.files`), else None."""
    sdk = require("databricks.sdk", "databricks", "Databricks storage")
    if hasattr(sdk.WorkspaceClient, "files"):
        return None
    from databricks.sdk.version import __version__

    return UnsupportedOperationError(
        url,
        f"databricks-sdk {__version__} (what this runtime ships) has no Files API, which a Unity Catalog volume's "
        f"reads and commits need; upgrade it in the notebook with `{SDK_UPGRADE}` then "
        "`dbutils.library.restartPython()`, or install mds-streaming[databricks]",
    )


class _DatabricksStorage(Storage):
    """Shared client handling and error mapping of the two Databricks APIs."""

    env_vars = (
        "DATABRICKS_HOST",
        "DATABRICKS_TOKEN",
        "DATABRICKS_CONFIG_PROFILE",
        "DATABRICKS_CONFIG_FILE",
        "DATABRICKS_CLIENT_ID",
        "DATABRICKS_CLIENT_SECRET",
        "DATABRICKS_AUTH_TYPE",
        *workspace_budget.ENV_VARS,
    )
    privilege_hint = ""

    def __init__(self) -> None:
        self._clients = ClientPool(self._build_client, per_thread=True)

    @staticmethod
    def cache_key(url: str) -> str:
        return ""

    @staticmethod
    def _build_client(timeout: float) -> Any:
        sdk = require("databricks.sdk", "databricks", "Databricks storage")
        from databricks.sdk.core import Config

        seconds = max(1, int(timeout))
        options: dict[str, Any] = {"http_timeout_seconds": seconds, "retry_timeout_seconds": seconds}
        host = os.environ.get("DATABRICKS_HOST", "")
        if "@" in host.partition("://")[2].partition("/")[0]:
            # A user:password in the host authenticates nothing and would reach the SDK's own logs: drop it.
            scheme, _, rest = host.rpartition("://")
            options["host"] = f"{scheme}://{rest.rpartition('@')[2]}" if scheme else rest.rpartition("@")[2]
        client = sdk.WorkspaceClient(config=Config(**options))
        from streaming.storage.databricks_transport import route_through_budget

        route_through_budget(client)
        return client

    def _client(self, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return self._clients.get(timeout)

    @staticmethod
    def _path(url: str) -> str:
        return split_url(url).key

    def _send_whole(self, send: Callable[[], None]) -> None:
        """Run `send`, a whole overwriting upload, again (up to `UPLOAD_ATTEMPTS` in all) while it fails for a reason
        that may pass: a server error, a part cloud storage kept failing, a lost connection, an exhausted retry
        window. A refusal (bad path, credentials, privileges, a conflict) is raised at once."""
        from databricks.sdk import errors as dbx

        refusals = (dbx.BadRequest, dbx.Unauthenticated, dbx.PermissionDenied, dbx.NotFound, dbx.ResourceConflict)
        call_with_retry(send, UPLOAD_ATTEMPTS, permanent=(*refusals, dbx.NotImplemented, IncompleteTransferError))

    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        from databricks.sdk import errors as dbx
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import Timeout

        throttled = exc.__cause__ if isinstance(exc, TimeoutError) else None
        if throttled is not None and getattr(throttled, "retry_after_secs", None) is not None:
            # The SDK's retry loop waited as each 429/503 answer's Retry-After asked, until its window ran out.
            return EndpointUnreachableError(
                url, f"the workspace kept throttling the request (429/503: {_answer(throttled)}); {exc}"
            )
        if isinstance(exc, dbx.NotFound):
            return ObjectNotFoundError(
                url,
                f"not found ({_answer(exc)}); check the path, that the volume exists and the data was written there",
            )
        if isinstance(exc, dbx.Unauthenticated):
            return CredentialsError(
                url, f"the workspace rejected the credentials (401); check the token, or {AUTH_HINT}"
            )
        if isinstance(exc, dbx.PermissionDenied):
            return StoragePermissionError(url, f"permission denied; {self.privilege_hint}")
        if isinstance(exc, ValueError) and "default auth" in str(exc):
            return CredentialsError(url, f"default auth: cannot configure default credentials; {AUTH_HINT}")
        if isinstance(exc, (RequestsConnectionError, Timeout, TimeoutError)):
            return EndpointUnreachableError(
                url,
                f"cannot reach the Databricks workspace ({type(exc).__name__}); "
                "check DATABRICKS_HOST (or the profile's host) and the network",
            )
        if isinstance(exc, dbx.DatabricksError):
            if getattr(exc, "retry_after_secs", None) is not None or isinstance(exc, dbx.InternalError):
                return EndpointUnreachableError(url, f"the workspace failed the request ({_answer(exc)})")
            return RequestRejectedError(url, f"the workspace refused the request ({_answer(exc)})")
        return None


def _body(source: BinaryIO) -> BinaryIO | bytes:
    """What to hand the SDK as an upload's body: the open file, or its bytes for an SDK that resends a read stream."""
    return source if sdk_version() >= REWINDING_SDK else source.read()


def _answer(exc: BaseException) -> str:
    """The workspace's answer in an SDK error: its `error_code` and message (which never hold the token)."""
    code = getattr(exc, "error_code", None)
    return f"{code}: {exc}" if code else str(exc)


class VolumesStorage(_DatabricksStorage):
    """Unity Catalog volumes through the Files API (`/api/2.0/fs/...`)."""

    privilege_hint = (
        "check that the principal has READ VOLUME (and WRITE VOLUME to write) on the volume, and "
        "USE CATALOG/USE SCHEMA on its parents"
    )

    def _files(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        """The Files API of this thread's client, after refusing an SDK that has none (naming `url`)."""
        require_files_api(url)
        return self._client(timeout).files

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        response = self._files(url, timeout).download(self._path(url))
        with response.contents as stream:
            while chunk := stream.read(CHUNK_SIZE):
                sink.write(chunk)
        # Older SDKs hand the header over as text.
        return None if response.content_length is None else int(response.content_length)

    def _upload_if_absent(self, local_path: str, url: str) -> bool:
        files, path = self._files(url), self._path(url)
        # Imported once the SDK is known to have the Files API: the ones without it lack these names too.
        from databricks.sdk.errors import AlreadyExists, ResourceAlreadyExists

        with open(local_path, "rb") as source:
            try:
                files.upload(path, _body(source), overwrite=False)
            except (AlreadyExists, ResourceAlreadyExists):
                return False
        # The file is ours (nobody can overwrite a create-only write): it must hold what was sent, never less.
        expected = os.path.getsize(local_path)
        stored = files.get_metadata(path).content_length
        if stored is not None and int(stored) != expected:
            files.delete(path)
            raise IncompleteTransferError(
                url, f"created with {stored} of {expected} bytes; removed it, so no partial file stands"
            )
        return True

    def _upload(self, local_path: str, url: str) -> None:
        path = self._path(url)
        files = self._files(url)

        def send() -> None:
            with open(local_path, "rb") as source:
                files.upload(path, _body(source), overwrite=True)

        self._send_whole(send)
        # An SDK that resends an already-read body after a throttled PUT stores an empty file. Only that is checked:
        # another size may be a concurrent writer's overwrite (committers rewrite index.json at once by design).
        expected = os.path.getsize(local_path)
        stored = files.get_metadata(path).content_length
        if expected and stored is not None and int(stored) == 0:
            raise IncompleteTransferError(url, f"uploaded {expected} bytes but the volume holds an empty file")

    def _list(self, prefix_url: str) -> Iterator[str]:
        from databricks.sdk.errors import NotFound

        scheme = "dbfs:" if split_url(prefix_url).scheme == "dbfs" else ""
        pending = [self._path(prefix_url).rstrip("/")]
        while pending:
            directory = pending.pop()
            try:
                entries = list(self._files(prefix_url).list_directory_contents(directory))
            except NotFound:
                continue
            for entry in entries:
                if entry.is_directory:
                    pending.append(entry.path.rstrip("/"))
                else:
                    yield scheme + entry.path

    def _size(self, url: str) -> int | None:
        from databricks.sdk.errors import NotFound

        try:
            length = self._files(url).get_metadata(self._path(url)).content_length
        except NotFound:
            return None
        return int(length)

    def _modified(self, url: str) -> float | None:
        import email.utils

        from databricks.sdk.errors import NotFound

        try:
            stamp = self._files(url).get_metadata(self._path(url)).last_modified
        except NotFound:
            return None
        return email.utils.parsedate_to_datetime(stamp).timestamp()

    def _delete(self, url: str) -> None:
        from databricks.sdk.errors import NotFound

        try:
            self._files(url).delete(self._path(url))
        except NotFound:
            pass


class DBFSStorage(_DatabricksStorage):
    """The legacy DBFS API (`/api/2.0/dbfs/...`) for `dbfs:/` paths outside `/Volumes`."""

    privilege_hint = "check the principal's access to this DBFS path (DBFS root access may be disabled)"

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        client = self._client(timeout)
        path = self._path(url)
        size = client.dbfs.get_status(path).file_size or 0
        offset = 0
        while offset < size:
            block = client.dbfs.read(path, offset=offset, length=DBFS_READ_LIMIT)
            data = base64.b64decode(block.data or "")
            if not data:
                break
            sink.write(data)
            offset += len(data)
        return size

    def _upload_if_absent(self, local_path: str, url: str) -> bool:
        from databricks.sdk.errors import AlreadyExists, ResourceAlreadyExists

        with open(local_path, "rb") as source:
            try:
                self._client().dbfs.upload(self._path(url), source, overwrite=False)
            except (AlreadyExists, ResourceAlreadyExists):
                return False
        return True

    def _upload(self, local_path: str, url: str) -> None:
        dbfs, path = self._client().dbfs, self._path(url)

        def send() -> None:
            with open(local_path, "rb") as source:
                dbfs.upload(path, source, overwrite=True)

        self._send_whole(send)

    def _list(self, prefix_url: str) -> Iterator[str]:
        from databricks.sdk.errors import NotFound

        try:
            entries = list(self._client().dbfs.list(self._path(prefix_url).rstrip("/") or "/", recursive=True))
        except NotFound:
            return
        for entry in entries:
            if not entry.is_dir:
                yield "dbfs:" + entry.path

    def _size(self, url: str) -> int | None:
        from databricks.sdk.errors import NotFound

        try:
            status = self._client().dbfs.get_status(self._path(url))
        except NotFound:
            return None
        return None if status.is_dir else int(status.file_size or 0)

    def _modified(self, url: str) -> float | None:
        from databricks.sdk.errors import NotFound

        try:
            status = self._client().dbfs.get_status(self._path(url))
        except NotFound:
            return None
        return None if status.is_dir else (status.modification_time or 0) / 1000

    def _delete(self, url: str) -> None:
        from databricks.sdk.errors import NotFound

        try:
            self._client().dbfs.delete(self._path(url))
        except NotFound:
            pass

    def folder_exists(self, url: str) -> bool:
        """Whether `url` names an existing DBFS directory (upstream's DBFS uploader requires its folder to exist)."""
        from databricks.sdk.errors import NotFound

        with self._errors(url):
            try:
                return bool(self._client().dbfs.get_status(self._path(url)).is_dir)
            except NotFound:
                return False
