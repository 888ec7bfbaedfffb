"""`gs://bucket/key` through google-cloud-storage, or through the S3 API when GCS HMAC keys are set.

google-cloud-storage (a dependency of gcsfs, so the `gcs` extra provides it) is used directly rather
than gcsfs: its sync client needs no event loop, fork-safe rebuilding is trivial, and it avoids gcsfs's
storage-control gRPC probe, which stalls 60 s per bucket against emulators.

Environment: `GCS_KEY` + `GCS_SECRET` (upstream: HMAC keys, used through the S3 API at
storage.googleapis.com); `STORAGE_EMULATOR_HOST` (an emulator, anonymous); otherwise Application Default
Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud, metadata server), and anonymous access when none exist.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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
from streaming.storage.s3 import S3Storage
from streaming.storage.url import split_url

HMAC_ENDPOINT = "https://storage.googleapis.com"
CREDENTIAL_HINT = (
    "GOOGLE_APPLICATION_CREDENTIALS (or run `gcloud auth application-default login`), "
    "or GCS_KEY and GCS_SECRET for HMAC keys"
)


class GCSStorage(Storage):
    """Google Cloud Storage over its JSON API; one client per (process, thread, timeout)."""

    env_vars = (
        "GCS_KEY",
        "GCS_SECRET",
        "STORAGE_EMULATOR_HOST",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT",
    )

    def __init__(self) -> None:
        self._anonymous = False
        self._clients = ClientPool(self._build_client, per_thread=True)

    @classmethod
    def from_url(cls, url: str) -> Storage:
        if os.environ.get("GCS_KEY") and os.environ.get("GCS_SECRET"):
            return S3Storage(
                scheme="gs",
                endpoint_url=HMAC_ENDPOINT,
                key=os.environ["GCS_KEY"],
                secret=os.environ["GCS_SECRET"],
                region="auto",
                extra="gcs",
                credential_hint="GCS_KEY/GCS_SECRET (HMAC keys)",
                endpoint_hint=f"the GCS S3-compatible endpoint {HMAC_ENDPOINT}",
            )
        return cls()

    @staticmethod
    def cache_key(url: str) -> str:
        return ""

    def _build_client(self, timeout: float) -> Any:
        storage = require("google.cloud.storage", "gcs", "Google Cloud Storage")
        project = os.environ.get("GOOGLE_CLOUD_PROJECT")
        if os.environ.get("STORAGE_EMULATOR_HOST"):
            from google.auth.credentials import AnonymousCredentials

            return storage.Client(project=project or "emulator", credentials=AnonymousCredentials())
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            credentials, found_project = google.auth.default()
        except DefaultCredentialsError:
            if os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"):
                raise
            self._anonymous = True
            return storage.Client.create_anonymous_client()
        return storage.Client(project=project or found_project, credentials=credentials)

    def _client(self, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return self._clients.get(timeout)

    @staticmethod
    def _retry(timeout: float) -> Any:
        from google.cloud.storage.retry import DEFAULT_RETRY

        return DEFAULT_RETRY.with_timeout(timeout)

    def _blob(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        location = split_url(url)
        if not location.netloc:
            raise ValueError(f"{url!r} has no bucket; expected gs://<bucket>/<key>")
        return self._client(timeout).bucket(location.netloc).blob(location.key)

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        blob = self._blob(url, timeout)
        blob.download_to_file(sink, timeout=timeout, retry=self._retry(timeout))
        return None  # the client already verified the object's checksum

    def _upload(self, local_path: str, url: str) -> None:
        self._blob(url).upload_from_filename(local_path, timeout=DEFAULT_TIMEOUT, retry=self._retry(DEFAULT_TIMEOUT))

    def _upload_if_absent(self, local_path: str, url: str) -> bool:
        from google.api_core.exceptions import PreconditionFailed

        try:  # generation 0 means "no live object": the create-only precondition
            self._blob(url).upload_from_filename(
                local_path, if_generation_match=0, timeout=DEFAULT_TIMEOUT, retry=self._retry(DEFAULT_TIMEOUT)
            )
        except PreconditionFailed:
            return False
        return True

    def _list(self, prefix_url: str) -> Iterator[str]:
        location = split_url(prefix_url)
        prefix = location.key.strip("/") + "/" if location.key.strip("/") else ""
        for blob in self._client().list_blobs(location.netloc, prefix=prefix, retry=self._retry(DEFAULT_TIMEOUT)):
            yield f"gs://{location.netloc}/{blob.name}"

    def _size(self, url: str) -> int | None:
        from google.api_core.exceptions import NotFound

        location = split_url(url)
        try:
            blob = self._client().bucket(location.netloc).get_blob(location.key, retry=self._retry(DEFAULT_TIMEOUT))
        except NotFound:
            return None
        return None if blob is None else int(blob.size)

    def _modified(self, url: str) -> float | None:
        from google.api_core.exceptions import NotFound

        location = split_url(url)
        try:
            blob = self._client().bucket(location.netloc).get_blob(location.key, retry=self._retry(DEFAULT_TIMEOUT))
        except NotFound:
            return None
        return None if blob is None else blob.updated.timestamp()

    def _delete(self, url: str) -> None:
        from google.api_core.exceptions import NotFound

        try:
            self._blob(url).delete(retry=self._retry(DEFAULT_TIMEOUT))
        except NotFound:
            pass

    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        from google.api_core import exceptions as gexc
        from google.auth.exceptions import DefaultCredentialsError, RefreshError
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import Timeout

        endpoint = os.environ.get("STORAGE_EMULATOR_HOST") or "storage.googleapis.com"
        if isinstance(exc, gexc.NotFound):
            bucket = split_url(url).netloc
            if "bucket" in str(exc.message).lower():
                return ObjectNotFoundError(url, f"bucket {bucket!r} does not exist; check the bucket name")
            return self._not_found(url)
        if isinstance(exc, (gexc.Unauthorized, DefaultCredentialsError, RefreshError)) or (
            isinstance(exc, gexc.Forbidden) and self._anonymous
        ):
            return CredentialsError(url, f"no usable Google credentials ({type(exc).__name__}); set {CREDENTIAL_HINT}")
        if isinstance(exc, gexc.Forbidden):
            return StoragePermissionError(
                url, "access denied (403); check that the account of the Google credentials may access this bucket"
            )
        if isinstance(exc, (RequestsConnectionError, Timeout, gexc.RetryError, ConnectionError)):
            return EndpointUnreachableError(
                url,
                f"cannot reach {endpoint} ({type(exc).__name__}); check STORAGE_EMULATOR_HOST (if set) and the network",
            )
        return None
