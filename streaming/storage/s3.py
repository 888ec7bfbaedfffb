"""`s3://bucket/key` through boto3 (also serves `gs://` when GCS HMAC keys are set); shard downloads in DataLoader
workers through awscrt when it is installed (`streaming/storage/s3_native.py`).

boto3 was chosen over s3fs by measurement (`tests/storage/bench_s3_get.py`, 100 x 1 MB objects from a
loopback SeaweedFS, streamed into files): on 8 threads boto3 `get_object` fetched 1.4-1.5x more objects per
second than s3fs `get_file`, and about as many sequentially; boto3 clients are thread-safe, need no event-loop
thread, and are simply rebuilt in a forked DataLoader worker.

Environment: `S3_ENDPOINT_URL` (upstream) or boto3's own `AWS_ENDPOINT_URL_S3`/`AWS_ENDPOINT_URL`;
the boto3 credential chain (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE`, ...), with an
anonymous fallback when no credentials exist; `S3_CANNED_ACL` for uploads;
`MOSAICML_STREAMING_AWS_REQUESTER_PAYS` (comma-separated bucket names) for requester-pays buckets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, TypedDict
from urllib.parse import urlsplit

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

NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound"}
CREATE_CONFLICT_CODES = {"412", "PreconditionFailed", "409", "ConditionalRequestConflict"}
DENIED_CODES = {"403", "AccessDenied", "Forbidden", "AllAccessDisabled"}
BAD_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "TokenRefreshRequired",
    "InvalidClientTokenId",
    "AuthorizationHeaderMalformed",
}


def _without_userinfo(endpoint: str) -> str:
    parts = urlsplit(endpoint)
    return (
        parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")).geturl()
        if parts.hostname
        else endpoint
    )


_loader: Any = None


def _botocore_session() -> Any:
    """A new botocore session that reuses this process's (or its forking parent's) parsed service models.

    Building an S3 client parses botocore's JSON models, ~0.1 s of CPU; every DataLoader worker builds its own
    client, at the moment its first downloads should start. The data loader holds only parsed files (no
    sockets, credentials or locks), so a forked worker can use its parent's and build a client in ~30 ms.
    """
    global _loader
    import botocore.session

    session = botocore.session.Session()
    if _loader is None:
        _loader = session.get_component("data_loader")
    else:
        session.register_component("data_loader", _loader)
    return session


class _Extra(TypedDict, total=False):
    """Optional operation arguments; a TypedDict so that they cannot be taken for `_call`'s ``timeout``."""

    RequestPayer: str
    ContinuationToken: str


@dataclass
class _NativeState:
    pid: int
    credentials: Any  # botocore credentials, or None when none were found
    locations: dict[str, Any]  # bucket -> s3_native.ObjectLocation
    signing: dict[str, Any]  # region -> awscrt signing config of `credentials`


class S3Storage(Storage):
    """An S3 API endpoint; one client per (process, timeout), shared by threads."""

    env_vars = (
        "S3_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "S3_CANNED_ACL",
        "MOSAICML_STREAMING_AWS_REQUESTER_PAYS",
    )

    def __init__(
        self,
        *,
        scheme: str = "s3",
        endpoint_url: str | None = None,
        key: str | None = None,
        secret: str | None = None,
        region: str | None = None,
        canned_acl: str | None = None,
        requester_pays: frozenset[str] = frozenset(),
        extra: str = "s3",
        credential_hint: str = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE",
        endpoint_hint: str = "S3_ENDPOINT_URL or AWS_ENDPOINT_URL_S3",
    ) -> None:
        self.scheme = scheme
        self._endpoint_url = endpoint_url
        self._key = key
        self._secret = secret
        self._region = region
        self._canned_acl = canned_acl
        self._requester_pays = requester_pays
        self._extra = extra
        self._credential_hint = credential_hint
        self._endpoint_hint = endpoint_hint
        self._anonymous = False
        self._clients = ClientPool(self._build_client)
        self._native: _NativeState | None = None

    @classmethod
    def from_url(cls, url: str) -> S3Storage:
        payers = os.environ.get("MOSAICML_STREAMING_AWS_REQUESTER_PAYS", "")
        return cls(
            endpoint_url=os.environ.get("S3_ENDPOINT_URL") or None,
            canned_acl=os.environ.get("S3_CANNED_ACL") or None,
            requester_pays=frozenset(name.strip() for name in payers.split(",") if name.strip()),
        )

    @staticmethod
    def cache_key(url: str) -> str:
        return ""

    # -- clients --------------------------------------------------------------------------------
    def _build_client(self, timeout: float, anonymous: bool) -> Any:
        boto3 = require("boto3", self._extra, "S3 storage")
        from botocore import UNSIGNED
        from botocore.config import Config

        session = boto3.session.Session(
            aws_access_key_id=self._key, aws_secret_access_key=self._secret, botocore_session=_botocore_session()
        )
        config = Config(
            connect_timeout=min(timeout, 10.0),
            read_timeout=timeout,
            max_pool_connections=64,
            retries={"mode": "standard", "max_attempts": 3},
            signature_version=UNSIGNED if anonymous else None,
        )
        region = self._region or session.region_name or "us-east-1"
        client = session.client("s3", endpoint_url=self._endpoint_url, region_name=region, config=config)
        if self._native is None or self._native.pid != os.getpid():
            # The credentials the client just resolved (cached by its session), for native downloads to sign with.
            self._native = _NativeState(os.getpid(), None if anonymous else session.get_credentials(), {}, {})
        return client

    def _call(self, operation: str, timeout: float = DEFAULT_TIMEOUT, **kwargs: Any) -> Any:
        """Run one client operation; with no credentials anywhere, switch to anonymous requests once."""
        from botocore.exceptions import NoCredentialsError

        try:
            return getattr(self._clients.get(timeout, self._anonymous), operation)(**kwargs)
        except NoCredentialsError:
            if self._anonymous:
                raise
            self._anonymous = True
            return getattr(self._clients.get(timeout, True), operation)(**kwargs)

    def _locate(self, url: str) -> tuple[str, str]:
        location = split_url(url)
        if not location.netloc:
            raise ValueError(f"{url!r} has no bucket; expected {self.scheme}://<bucket>/<key>")
        return location.netloc, location.key

    def _payer(self, bucket: str) -> _Extra:
        return _Extra(RequestPayer="requester") if bucket in self._requester_pays else _Extra()

    # -- operations -----------------------------------------------------------------------------
    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        bucket, key = self._locate(url)
        response = self._call("get_object", timeout, Bucket=bucket, Key=key, **self._payer(bucket))
        body = response["Body"]
        try:
            for chunk in body.iter_chunks(CHUNK_SIZE):
                sink.write(chunk)
        finally:
            body.close()
        return response.get("ContentLength")

    def _get_natively(self, url: str, local_path: str, timeout: float, max_bytes: int | None) -> bool:
        from streaming.storage import s3_native

        if not s3_native.enabled():
            return False
        bucket, key = self._locate(url)
        try:
            client = self._clients.get(timeout, self._anonymous)  # built in this process: `_native` is its own
            native = self._native
            if native is None or native.pid != os.getpid():
                return False
            location = native.locations.get(bucket)
            if location is None:
                location = native.locations[bucket] = s3_native.ObjectLocation(client, bucket)
            signing = None
            if native.credentials is not None and not self._anonymous:
                signing = native.signing.get(location.region)
                if signing is None:
                    signing = native.signing[location.region] = s3_native.signing_config(
                        native.credentials, location.region
                    )
            return s3_native.get(
                location,
                key,
                local_path,
                signing=signing,
                requester_pays=bucket in self._requester_pays,
                timeout=timeout,
                max_bytes=max_bytes,
            )
        except Exception:  # noqa: BLE001 - any failure: boto3's path meets it again and reports it as itself
            return False

    def _upload(self, local_path: str, url: str) -> None:
        from boto3.s3.transfer import TransferConfig

        bucket, key = self._locate(url)
        extra = {"ACL": self._canned_acl} if self._canned_acl else {}
        self._call(
            "upload_file",
            Filename=local_path,
            Bucket=bucket,
            Key=key,
            ExtraArgs=extra,
            Config=TransferConfig(use_threads=False),
        )

    def _upload_if_absent(self, local_path: str, url: str) -> bool:
        from botocore.exceptions import ClientError

        bucket, key = self._locate(url)
        extra: dict[str, Any] = {"ACL": self._canned_acl} if self._canned_acl else {}
        with open(local_path, "rb") as body:
            try:
                self._call("put_object", Bucket=bucket, Key=key, Body=body, IfNoneMatch="*", **extra)
            except ClientError as exc:
                # 412 when the object exists; 409 when a concurrent conditional write to the same key is in flight
                if exc.response.get("Error", {}).get("Code") in CREATE_CONFLICT_CODES:
                    return False
                raise
        return True

    def _list(self, prefix_url: str) -> Iterator[str]:
        bucket, key = self._locate(prefix_url)
        prefix = key.strip("/") + "/" if key.strip("/") else ""
        token: str | None = None
        while True:
            extra = self._payer(bucket)
            if token:
                extra["ContinuationToken"] = token
            page = self._call("list_objects_v2", Bucket=bucket, Prefix=prefix, **extra)
            for item in page.get("Contents", []):
                yield f"{self.scheme}://{bucket}/{item['Key']}"
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def _size(self, url: str) -> int | None:
        from botocore.exceptions import ClientError

        bucket, key = self._locate(url)
        try:
            return self._call("head_object", Bucket=bucket, Key=key, **self._payer(bucket))["ContentLength"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in NOT_FOUND_CODES:
                return None
            raise

    def _modified(self, url: str) -> float | None:
        from botocore.exceptions import ClientError

        bucket, key = self._locate(url)
        try:
            return self._call("head_object", Bucket=bucket, Key=key, **self._payer(bucket))["LastModified"].timestamp()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in NOT_FOUND_CODES:
                return None
            raise

    def _delete(self, url: str) -> None:
        bucket, key = self._locate(url)
        self._call("delete_object", Bucket=bucket, Key=key)

    # -- errors ---------------------------------------------------------------------------------
    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        from boto3.exceptions import S3UploadFailedError
        from botocore import exceptions as bce

        if isinstance(exc, S3UploadFailedError) and isinstance(exc.__context__, Exception):
            exc = exc.__context__  # boto3 wraps the ClientError of a failed upload
        endpoint = _without_userinfo(self._endpoint_url) if self._endpoint_url else "the default S3 endpoint"
        if isinstance(exc, bce.ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            bucket = split_url(url).netloc
            if code == "NoSuchBucket":
                return ObjectNotFoundError(
                    url,
                    f"bucket {bucket!r} does not exist at {endpoint}; check the bucket name and {self._endpoint_hint}",
                )
            if code in NOT_FOUND_CODES:
                return self._not_found(url)
            if code in BAD_CREDENTIAL_CODES:
                return CredentialsError(
                    url,
                    f"{endpoint} rejected the credentials ({code}); check "
                    f"{self._credential_hint}, and that {self._endpoint_hint} names the "
                    "store that issued them",
                )
            if code in DENIED_CODES:
                if self._anonymous:
                    return CredentialsError(
                        url,
                        f"no credentials were found and anonymous access was denied "
                        f"({code}); set {self._credential_hint}",
                    )
                return StoragePermissionError(
                    url,
                    f"access denied ({code}); check that the credentials "
                    f"({self._credential_hint}) may access bucket {bucket!r}; for a "
                    "requester-pays bucket list it in MOSAICML_STREAMING_AWS_REQUESTER_PAYS",
                )
            return None
        if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError, bce.CredentialRetrievalError)):
            return CredentialsError(url, f"no usable credentials ({type(exc).__name__}); set {self._credential_hint}")
        if isinstance(exc, (bce.ConnectionError, bce.HTTPClientError)):
            return EndpointUnreachableError(
                url,
                f"cannot reach or read from {endpoint} ({type(exc).__name__}); "
                f"check {self._endpoint_hint} and the network",
            )
        return None
