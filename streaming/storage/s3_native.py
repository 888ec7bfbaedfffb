"""Shard downloads from S3 through awscrt's native client, where that is safe: in DataLoader workers.

Measured on a loopback SeaweedFS (1 MiB objects, 4 connections): boto3 `get_object` costs 5.2-5.4 ms of CPU per
object, about 40 % of it in botocore's request machinery (endpoint rules, event hooks, response parsing) and all
of it under the GIL; awscrt signs, sends and writes the file in native threads for 1.8-2.1 ms. On a node whose
cores are shared by the trainer's workers and the storage client, that is the difference between keeping up with
the network and not.

awscrt does not support ``fork`` (its event-loop threads hold locks a forked child inherits locked), so its client
is only made in processes that are not forked again: PyTorch DataLoader workers (``STREAMING_S3_NATIVE=auto``, the
default), or every process with ``STREAMING_S3_NATIVE=1``; ``0`` turns it off. A process forked from one that had a
native client never makes its own and uses boto3. Anything the native path cannot do as boto3 would (no
awscrt installed, an unusual endpoint, an error of any kind) falls back to boto3 for that object, so errors,
retries and region redirects stay boto3's.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from typing import Any
from urllib.parse import quote, urlsplit

_MODE_VARIABLE = "STREAMING_S3_NATIVE"

_lock = threading.Lock()
_clients: dict[tuple[str, str], Any] = {}  # (scheme, region) -> S3Client of this process
_inherited_clients: list[Any] = []  # a forking parent's clients: never used, never freed
_made_here = False  # this process made a native client (its forked children must not)
_inherited = False  # forked from a process that had one
#: Objects this process downloaded natively (how tests and benchmarks tell which path ran).
downloads = 0


def _after_fork_in_child() -> None:
    global _lock, _made_here, _inherited
    _lock = threading.Lock()
    # The parent's clients' threads do not exist here, and their locks may be held forever: freeing a client
    # would wait on them (or crash), so they are kept, never used, for the life of this process.
    _inherited_clients.extend(_clients.values())
    _clients.clear()
    _inherited = _inherited or _made_here
    _made_here = False


os.register_at_fork(after_in_child=_after_fork_in_child)


def _in_dataloader_worker() -> bool:
    # Without importing torch: a DataLoader worker has it imported already.
    data = sys.modules.get("torch.utils.data")
    return data is not None and data.get_worker_info() is not None


def enabled() -> bool:
    """Whether this process may download through awscrt (it also needs to be installed)."""
    mode = os.environ.get(_MODE_VARIABLE, "auto").strip().lower()
    if mode in ("0", "false", "off", "no") or _inherited:
        return False
    if mode not in ("1", "true", "on", "yes") and not _in_dataloader_worker():
        return False
    try:
        import awscrt.s3  # noqa: F401
    except ImportError:
        return False
    return True


def _client(scheme: str, region: str) -> Any:
    """This process's native client for one endpoint scheme and region (requests bring their own signing)."""
    global _made_here
    key = (scheme, region)
    client = _clients.get(key)
    if client is not None:
        return client
    from awscrt import io, s3

    with _lock:
        client = _clients.get(key)
        if client is None:
            loops = io.EventLoopGroup(2)
            client = s3.S3Client(
                bootstrap=io.ClientBootstrap(loops, io.DefaultHostResolver(loops)),
                region=region,
                tls_mode=s3.S3RequestTlsMode.ENABLED if scheme == "https" else s3.S3RequestTlsMode.DISABLED,
            )
            _clients[key] = client
            _made_here = True
    return client


def signing_config(credentials: Any, region: str) -> Any:
    """How requests with botocore ``credentials`` are signed (build once per credentials and region)."""
    from awscrt import auth, s3

    provider = auth.AwsCredentialsProvider.new_delegate(lambda: _crt_credentials(credentials))
    return s3.create_default_s3_signing_config(region=region, credential_provider=provider)


def _crt_credentials(credentials: Any) -> Any:
    """botocore credentials (refreshed by botocore when they expire) as awscrt's."""
    from awscrt import auth

    frozen = credentials.get_frozen_credentials()
    return auth.AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)


class ObjectLocation:
    """Where botocore sends a bucket's requests: scheme, host and the path before the key (resolved once)."""

    def __init__(self, boto_client: Any, bucket: str) -> None:
        probe = "streaming-native-probe"
        url = urlsplit(
            boto_client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": probe}, ExpiresIn=60)
        )
        if not url.path.endswith("/" + probe) or url.scheme not in ("http", "https"):
            raise ValueError(f"unexpected presigned URL layout for bucket {bucket!r}")
        self.scheme = url.scheme
        self.host = url.netloc
        self.prefix = url.path[: -len(probe)]
        self.region = boto_client.meta.region_name


def get(
    location: ObjectLocation,
    key: str,
    local_path: str,
    *,
    signing: Any,
    requester_pays: bool,
    timeout: float,
    max_bytes: int | None,
) -> bool:
    """Download one object to ``local_path`` atomically; False (leaving nothing) when boto3 should do it instead."""
    from awscrt import http, s3

    directory = os.path.dirname(os.path.abspath(local_path))
    handle, temp_path = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(local_path)}.", suffix=".part")
    os.close(handle)
    try:
        headers = [("Host", location.host)]
        if requester_pays:
            headers.append(("x-amz-request-payer", "requester"))
        request = http.HttpRequest("GET", location.prefix + quote(key, safe="/~"), http.HttpHeaders(headers))
        response: dict[str, Any] = {}

        def on_headers(status_code: int, headers: list[tuple[str, str]], **_: Any) -> None:
            response["status"] = status_code
            response["length"] = next((v for k, v in headers if k.lower() == "content-length"), None)

        client = _client(location.scheme, location.region)
        transfer = client.make_request(
            type=s3.S3RequestType.DEFAULT,
            operation_name="GetObject",
            request=request,
            signing_config=signing,
            recv_filepath=temp_path,
            on_headers=on_headers,
        )
        try:
            transfer.finished_future.result(timeout)
        except Exception:  # noqa: BLE001 - a timeout or any CRT error: boto3 fetches it and reports it
            transfer.cancel()
            with contextlib.suppress(Exception):
                transfer.finished_future.result(10)  # let it stop writing before its file is removed
            return False
        length = response.get("length")
        if response.get("status") != 200 or length is None or not length.isdigit():
            return False
        if os.path.getsize(temp_path) != int(length) or (max_bytes is not None and int(length) > max_bytes):
            return False  # boto3 then reports the cut-short or oversized object as such
        os.replace(temp_path, local_path)
        global downloads
        downloads += 1
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_path)
