"""`oci://bucket@namespace/key` through the `oci` SDK's Object Storage client.

Configuration comes from the OCI config file (`~/.oci/config`, or `OCI_CONFIG_FILE`; profile `DEFAULT`
or `OCI_CONFIG_PROFILE`). `OCI_OBJECT_STORAGE_ENDPOINT` overrides the regional endpoint (for dedicated
endpoints, proxies and tests). `@namespace` may be left out: the tenancy's namespace is then looked up.
The SDK's clients are not thread-safe, so each thread gets its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, BinaryIO

from streaming._extras import require
from streaming.storage.base import CHUNK_SIZE, DEFAULT_TIMEOUT, ClientPool, Storage
from streaming.storage.errors import (
    CredentialsError,
    EndpointUnreachableError,
    ObjectNotFoundError,
    StorageError,
    StoragePermissionError,
)
from streaming.storage.url import split_url

CONFIG_HINT = "the OCI config file (~/.oci/config or OCI_CONFIG_FILE, profile OCI_CONFIG_PROFILE)"


class OCIStorage(Storage):
    """OCI Object Storage; one client per (process, thread, timeout)."""

    env_vars = ("OCI_CONFIG_FILE", "OCI_CONFIG_PROFILE", "OCI_OBJECT_STORAGE_ENDPOINT", "OCI_REGION")

    def __init__(self) -> None:
        self._clients = ClientPool(self._build_client, per_thread=True)
        self._namespace: str | None = None

    @staticmethod
    def cache_key(url: str) -> str:
        return ""

    def _build_client(self, timeout: float) -> Any:
        oci = require("oci", "oci", "OCI Object Storage")
        location = os.environ.get("OCI_CONFIG_FILE") or oci.config.DEFAULT_LOCATION
        profile = os.environ.get("OCI_CONFIG_PROFILE") or oci.config.DEFAULT_PROFILE
        config = oci.config.from_file(file_location=location, profile_name=profile)
        retry = oci.retry.RetryStrategyBuilder(
            max_attempts=3,
            total_elapsed_time_seconds=max(timeout, 1.0),
            retry_base_sleep_time_seconds=0.5,
            retry_max_wait_between_calls_seconds=2,
        ).get_retry_strategy()
        options: dict[str, Any] = {"timeout": (min(timeout, 10.0), timeout), "retry_strategy": retry}
        endpoint = os.environ.get("OCI_OBJECT_STORAGE_ENDPOINT")
        if endpoint:
            options["service_endpoint"] = endpoint
        return oci.object_storage.ObjectStorageClient(config, **options)

    def _locate(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[Any, str, str, str]:
        location = split_url(url)
        bucket, _, namespace = location.netloc.partition("@")
        if not bucket:
            raise ValueError(f"{url!r} has no bucket; expected oci://<bucket>@<namespace>/<key>")
        client = self._clients.get(timeout)
        if not namespace:
            if self._namespace is None:
                self._namespace = client.get_namespace().data
            namespace = self._namespace
        return client, namespace, bucket, location.key

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        client, namespace, bucket, key = self._locate(url, timeout)
        response = client.get_object(namespace, bucket, key)
        for chunk in response.data.raw.stream(CHUNK_SIZE, decode_content=False):
            sink.write(chunk)
        length = response.headers.get("Content-Length")
        return int(length) if length is not None else None

    def _upload(self, local_path: str, url: str) -> None:
        from oci.object_storage import UploadManager

        client, namespace, bucket, key = self._locate(url)
        UploadManager(client, allow_parallel_uploads=False).upload_file(namespace, bucket, key, local_path)

    def _upload_if_absent(self, local_path: str, url: str) -> bool:
        import oci

        client, namespace, bucket, key = self._locate(url)
        with open(local_path, "rb") as body:
            try:
                client.put_object(namespace, bucket, key, body, if_none_match="*")
            except oci.exceptions.ServiceError as exc:
                if exc.status in (409, 412):  # IfNoneMatchFailed: the object exists
                    return False
                raise
        return True

    def _list(self, prefix_url: str) -> Iterator[str]:
        client, namespace, bucket, key = self._locate(prefix_url)
        prefix = key.strip("/") + "/" if key.strip("/") else ""
        netloc = split_url(prefix_url).netloc
        start = None
        while True:
            page = client.list_objects(namespace, bucket, prefix=prefix, start=start, fields="name,size").data
            for item in page.objects:
                yield f"oci://{netloc}/{item.name}"
            start = page.next_start_with
            if not start:
                return

    def _size(self, url: str) -> int | None:
        import oci

        client, namespace, bucket, key = self._locate(url)
        try:
            return int(client.head_object(namespace, bucket, key).headers["Content-Length"])
        except oci.exceptions.ServiceError as exc:
            if exc.status == 404 and exc.code in ("ObjectNotFound", None, ""):
                return None
            raise

    def _modified(self, url: str) -> float | None:
        import email.utils

        import oci

        client, namespace, bucket, key = self._locate(url)
        try:
            stamp = client.head_object(namespace, bucket, key).headers["Last-Modified"]
        except oci.exceptions.ServiceError as exc:
            if exc.status == 404 and exc.code in ("ObjectNotFound", None, ""):
                return None
            raise
        return email.utils.parsedate_to_datetime(stamp).timestamp()

    def _delete(self, url: str) -> None:
        import oci

        client, namespace, bucket, key = self._locate(url)
        try:
            client.delete_object(namespace, bucket, key)
        except oci.exceptions.ServiceError as exc:
            if exc.status != 404 or exc.code != "ObjectNotFound":
                raise

    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        import oci

        bucket = split_url(url).netloc.partition("@")[0]
        if isinstance(exc, oci.exceptions.ServiceError):
            if exc.status == 404 and exc.code == "BucketNotFound":
                return ObjectNotFoundError(
                    url,
                    f"bucket {bucket!r} does not exist in this namespace, or the user "
                    "may not see it; check the bucket name and the policies",
                )
            if exc.status == 404 and exc.code == "NotAuthorizedOrNotFound":
                return StoragePermissionError(
                    url,
                    "not found or not authorized; check the path and that the user's "
                    f"policies allow access to bucket {bucket!r}",
                )
            if exc.status == 404:
                return self._not_found(url)
            if exc.status == 401:
                return CredentialsError(
                    url,
                    f"the server rejected the request signature ({exc.code}); check the "
                    f"credentials: user, fingerprint, tenancy and key_file in {CONFIG_HINT}",
                )
            if exc.status == 403:
                return StoragePermissionError(
                    url, f"access denied ({exc.code}); check the user's policies for bucket {bucket!r}"
                )
            return None
        if isinstance(
            exc,
            (
                oci.exceptions.ConfigFileNotFound,
                oci.exceptions.InvalidConfig,
                oci.exceptions.ProfileNotFound,
                oci.exceptions.InvalidPrivateKey,
                oci.exceptions.InvalidKeyFilePath,
            ),
        ):
            return CredentialsError(url, f"no usable OCI credentials ({type(exc).__name__}); check {CONFIG_HINT}")
        from oci._vendor.requests.exceptions import RequestException

        if isinstance(exc, RequestException):
            endpoint = os.environ.get("OCI_OBJECT_STORAGE_ENDPOINT") or "the regional Object Storage endpoint"
            return EndpointUnreachableError(
                url,
                f"cannot reach {endpoint} ({type(exc).__name__}); check the region "
                "in the OCI config, OCI_OBJECT_STORAGE_ENDPOINT and the network",
            )
        return None
