"""A stand-in for a Databricks workspace's Files API 2.0 (`/Volumes/...`) and DBFS API 2.0 (`dbfs:/...`).

Stdlib only. Files live under a root directory on disk (the remote path `/a/b` is `<root>/a/b`). It answers every
call the databricks-sdk versions we support make, at least as strictly as a workspace:

* Files API paths must lie in a Unity Catalog volume `/Volumes/<catalog>/<schema>/<volume>/`; only the volumes given
  with `--volume` exist. Other paths answer 400 `INVALID_PARAMETER_VALUE`; a missing catalog, schema or volume answers
  404 `NOT_FOUND` ("Volume 'c.s.v' does not exist").
* `PUT /api/2.0/fs/files{p}` overwrites unless `overwrite=false` (as documented: "If true or unspecified").
* A create with `overwrite=false` (Files API PUT/upload, DBFS `put`/`create`) checks and creates in one step: of
  concurrent creates of one name exactly one succeeds, as the services' create-only writes promise.
* Multipart upload (`?action=initiate-upload`, `create-upload-part-urls`, `?action=complete-upload`,
  `?action=abort-upload` and the older `create-abort-upload-url`) and, with `--upload-style resumable` (what GCP
  workspaces answer), resumable upload (`create-resumable-upload-url`, `Content-Range` chunks, 308 + `Range`).
  Parts other than the last must hold at least 5 MiB, as on S3.
* `create-download-url` hands out presigned URLs. Presigned URLs point at a second server (`--storage-port`, the
  stand-in for cloud storage: another origin, outside the workspace's limits) under `/presigned/`; they refuse an
  `Authorization` header, need the signature header they were issued with and the S3-style signing query
  (`X-Amz-Signature`, with `X-Amz-Credential` and an STS `X-Amz-Security-Token` beside it), and expire; their
  errors are XML, as cloud storage's are. `POST /fake/storage?expire_every=N&fail_every=M&fail_status=S` makes
  every Nth presigned request find its URL expired (403 `AccessDenied` "Request has expired", as S3 answers; the URL
  stays expired) and every Mth part upload fail with S (500 `InternalError` or 503 `SlowDown`) without storing it;
  0 turns either off.
  `deny_downloads=1` refuses every presigned download 403 `AccessDenied`, `deny_direct=1` every Files API download
  through the workspace host 403 `PERMISSION_DENIED`.
* Downloads honour `Range: bytes=a-b`, `bytes=a-` and `bytes=-n` (206, or 416 when unsatisfiable) and
  `If-Unmodified-Since` (412).
* Directory listings are paginated (`page_size`, opaque `page_token`, `next_page_token`); `--page-size` sets the
  server's page length.
* The workspace's own limits: an `/api/` request arriving while `--max-concurrent` (10) are in flight, or after
  `--max-per-second` (100) arrived in the last second, is answered 429 `REQUEST_LIMIT_EXCEEDED` with `Retry-After:
  --retry-after` before it is acted on (the Files API's limits as the Databricks CLI's client records them: 10
  concurrent requests and 100 per second per workspace). Rejected requests count too, and a request is in flight
  from its first byte to its answer's last. `POST /fake/limits?max_concurrent=N&max_per_second=M` changes them (0: no
  limit); `GET /fake/limits` reports the most seen in flight and the 429s answered so far.
* `--throttle SHARE` (or env `FAKE_DATABRICKS_THROTTLE`) answers that share of requests, evenly spread, with 429
  `REQUEST_LIMIT_EXCEEDED` / 503 `TEMPORARILY_UNAVAILABLE` and `Retry-After: --retry-after` seconds, before acting
  on them. `POST /fake/throttle?share=S&retry_after=N` changes it at run time.
* Every `/api/` request must carry `Authorization: Bearer <token>` (else 401). A path with a segment named `forbidden`
  answers 403 `PERMISSION_DENIED`. Unknown endpoints answer 404 (never 5xx or 429, which the SDK retries for minutes).
* `--request-log FILE` appends one JSON line per request: server (`workspace` or `storage`), method, path, query,
  range, status, bytes received.

Run: `python fake_databricks.py PORT ROOT TOKEN [--volume c.s.v ...] [options]` (binds 127.0.0.1 only; prints the
storage server's port once both listen).
"""

from __future__ import annotations

import argparse
import base64
import collections
import datetime
import email.utils
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import BinaryIO

FILES_PREFIX = "/api/2.0/fs/files"
DIRS_PREFIX = "/api/2.0/fs/directories"
DBFS_PREFIX = "/api/2.0/dbfs/"
PRESIGNED_PREFIX = "/presigned/"
SIGNATURE_HEADER = "x-fake-presigned-signature"
READ_LIMIT = 1 << 20
MIN_PART_SIZE = 5 << 20
MAX_PART_NUMBER = 10_000
MAX_PAGE_SIZE = 1000
COPY_CHUNK = 1 << 20


class ApiError(Exception):
    """An error answer of the workspace API: HTTP status plus the Databricks `error_code`."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


class StorageError(ApiError):
    """An error answer of a presigned (cloud storage) URL, sent as cloud storage's XML."""


@dataclass
class Upload:
    """An open multipart or resumable upload session."""

    remote: str
    target: Path
    overwrite: bool
    staging: Path
    resumable: bool
    parts: dict[int, str] = field(default_factory=dict)  # part number -> ETag
    received: int = 0  # resumable: bytes stored so far


@dataclass
class Presigned:
    """What one presigned URL allows: `upload-part`, `resumable`, `abort` or `download`, until `expires`."""

    action: str
    remote: str
    signature: str
    expires: float
    session: str = ""
    part_number: int = 0


@dataclass
class Throttle:
    """Answer `share` of the requests (evenly spread) with 429/503 and `Retry-After: retry_after`."""

    share: float = 0.0
    retry_after: int = 1
    seen: int = 0

    def hit(self) -> int | None:
        """The status to throttle this request with, or None to serve it."""
        self.seen += 1
        if int(self.seen * self.share) <= int((self.seen - 1) * self.share):
            return None
        return 429 if int(self.seen * self.share) % 2 else 503


@dataclass
class Limits:
    """The workspace's request limits: at most `max_concurrent` in flight and `max_per_second` arrivals a second.

    Call `arrive` and `leave` with the workspace lock held. A request over either limit is refused at arrival; it
    still counts as an arrival (for the rate) and is in flight until its 429 is sent.
    """

    max_concurrent: int = 10
    max_per_second: int = 100
    in_flight: int = 0
    most_in_flight: int = 0
    refused: int = 0
    arrivals: collections.deque = field(default_factory=collections.deque)

    def arrive(self, now: float) -> bool:
        """Count a new request; False if it exceeds a limit (answer it 429)."""
        while self.arrivals and self.arrivals[0] <= now - 1.0:
            self.arrivals.popleft()
        over_rate = bool(self.max_per_second) and len(self.arrivals) >= self.max_per_second
        over_concurrency = bool(self.max_concurrent) and self.in_flight >= self.max_concurrent
        self.arrivals.append(now)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if over_rate or over_concurrency:
            self.refused += 1
            return False
        return True

    def leave(self) -> None:
        self.in_flight -= 1


@dataclass
class StorageFaults:
    """Faults of the cloud storage behind presigned URLs: every `expire_every`th request finds its URL expired, every
    `fail_every`th part upload fails with `fail_status` (0: off); with `deny_downloads`, every download through a
    presigned URL is refused 403 `AccessDenied` (a bucket policy that denies the workspace's role); with
    `deny_direct`, every Files API download through the workspace host is refused 403 `PERMISSION_DENIED`. Call
    `next_*` with the workspace lock held."""

    expire_every: int = 0
    fail_every: int = 0
    fail_status: int = 500
    deny_downloads: bool = False
    deny_direct: bool = False
    requests: int = 0
    parts: int = 0
    expired: int = 0
    failed: int = 0

    def next_expires(self) -> bool:
        self.requests += 1
        hit = bool(self.expire_every) and self.requests % self.expire_every == 0
        self.expired += hit
        return hit

    def next_part_fails(self) -> bool:
        self.parts += 1
        hit = bool(self.fail_every) and self.parts % self.fail_every == 0
        self.failed += hit
        return hit


class Workspace:
    """The server's state: the file tree on disk, the volumes, open uploads, presigned URLs and DBFS handles."""

    def __init__(self, root: Path, token: str, volumes: set[tuple[str, str, str]], options: argparse.Namespace) -> None:
        self.root = root
        self.staging = root.parent / (root.name + ".staging")
        self.staging.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.volumes = volumes
        for catalog, schema, volume in volumes:
            (root / "Volumes" / catalog / schema / volume).mkdir(parents=True, exist_ok=True)
        self.upload_style = options.upload_style
        self.page_size = options.page_size
        self.throttle = Throttle(options.throttle, options.retry_after)
        self.limits = Limits(options.max_concurrent, options.max_per_second)
        self.retry_after = options.retry_after
        self.faults = StorageFaults()
        self.storage_host = ""  # host:port of the storage server, set once it listens
        self.request_log = open(options.request_log, "a", encoding="utf-8") if options.request_log else None
        self.uploads: dict[str, Upload] = {}
        self.presigned: dict[str, Presigned] = {}
        self.handles: dict[int, tuple[Path, bytearray]] = {}
        self.handle_ids = itertools.count(1)
        self.lock = threading.Lock()
        # Held from a create's existence check to its write, so of two `overwrite=false` creates of one name
        # exactly one succeeds (the services' create-only semantics); `claimed` holds the names of DBFS create
        # handles opened with `overwrite=false` and not yet closed, so a second create-only open fails too.
        self.create_lock = threading.Lock()
        self.claimed: dict[Path, int] = {}

    def log(self, entry: dict[str, object]) -> None:
        if self.request_log is None:
            return
        with self.lock:
            self.request_log.write(json.dumps(entry) + "\n")
            self.request_log.flush()

    def local(self, remote_path: str) -> Path:
        """Map an absolute remote path onto the root; reject escapes and forbidden segments."""
        if not remote_path.startswith("/"):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Path must be absolute: {remote_path!r}")
        parts = [p for p in remote_path.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid path: {remote_path!r}")
        if "forbidden" in parts:
            raise ApiError(403, "PERMISSION_DENIED", f"User does not have permission on {remote_path}")
        return self.root.joinpath(*parts)

    def in_volume(self, remote_path: str, *, file: bool) -> Path:
        """`local(remote_path)` for a path in an existing volume (a file must lie below the volume's root)."""
        parts = [p for p in remote_path.split("/") if p]
        if len(parts) < 4 or parts[0] != "Volumes" or (file and len(parts) < 5):
            raise ApiError(
                400,
                "INVALID_PARAMETER_VALUE",
                f"Invalid path {remote_path!r}: the Files API takes paths in a Unity Catalog volume, "
                "/Volumes/<catalog_name>/<schema_name>/<volume_name>/<path>",
            )
        catalog, schema, volume = parts[1:4]
        if not any(c == catalog for c, _, _ in self.volumes):
            raise ApiError(404, "NOT_FOUND", f"Catalog '{catalog}' does not exist.")
        if not any((c, s) == (catalog, schema) for c, s, _ in self.volumes):
            raise ApiError(404, "NOT_FOUND", f"Schema '{catalog}.{schema}' does not exist.")
        if (catalog, schema, volume) not in self.volumes:
            raise ApiError(404, "NOT_FOUND", f"Volume '{catalog}.{schema}.{volume}' does not exist.")
        return self.local(remote_path)

    def presign(self, action: str, remote: str, expire_time: str | None, **extra: object) -> dict:
        """A new presigned URL for `action` on the storage server, as the API returns it: `{"url", "headers"}`."""
        expires = parse_expire_time(expire_time) if expire_time else time.time() + 3600
        key = secrets.token_urlsafe(12)
        grant = Presigned(action, remote, secrets.token_hex(8), expires, **extra)  # type: ignore[arg-type]
        with self.lock:
            self.presigned[key] = grant
        # Signed as S3 signs a presigned URL with an STS session's credentials: the signature, the credential and
        # the session token ride in the query, so a client that quotes the URL in an error quotes them too.
        signing = urllib.parse.urlencode(
            {
                "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
                "X-Amz-Credential": f"ASIAFAKE{grant.signature[:8].upper()}/20260101/us-west-2/s3/aws4_request",
                "X-Amz-Expires": "3600",
                "X-Amz-Security-Token": f"IQoJb3JpZ2luX2Vj{grant.signature}",
                "X-Amz-Signature": grant.signature,
            }
        )
        return {
            "url": f"http://{self.storage_host}{PRESIGNED_PREFIX}{key}?{signing}",
            "headers": [{"name": SIGNATURE_HEADER, "value": grant.signature}],
        }

    def upload(self, token: str, remote: str | None = None) -> Upload:
        with self.lock:
            session = self.uploads.get(token)
        if session is None or (remote is not None and session.remote != remote):
            raise ApiError(404, "NOT_FOUND", f"Upload session not found for {remote or 'this path'}")
        return session

    def finish_upload(self, token: str) -> None:
        with self.lock:
            session = self.uploads.pop(token, None)
        if session is not None:
            shutil.rmtree(session.staging, ignore_errors=True)


def parse_expire_time(text: str) -> float:
    """Seconds since the epoch of an RFC 3339 time (`2026-01-01T00:00:00Z`)."""
    try:
        stamp = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid expire_time: {text!r}") from None
    if stamp.tzinfo is None:
        raise ApiError(400, "INVALID_PARAMETER_VALUE", f"expire_time needs a time zone: {text!r}")
    return stamp.timestamp()


def parse_bool(query: dict[str, str], name: str, default: bool) -> bool:
    if name not in query:
        return default
    if query[name] not in ("true", "false"):
        raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid value for {name}: {query[name]!r}")
    return query[name] == "true"


def byte_range(spec: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive byte range a `Range` header asks for, None for the whole file; 416 if unsatisfiable."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", (spec or "").strip())
    if match is None or match.groups() == ("", ""):
        return None  # absent or not one byte range: served whole, as RFC 9110 allows
    first_text, last_text = match.groups()
    if first_text == "":
        length = int(last_text)
        if length == 0 or size == 0:
            raise ApiError(
                416, "INVALID_PARAMETER_VALUE", "Requested range not satisfiable", {"Content-Range": f"bytes */{size}"}
            )
        return max(0, size - length), size - 1
    first = int(first_text)
    last = min(int(last_text), size - 1) if last_text else size - 1
    if first >= size or (last_text and int(last_text) < first):
        raise ApiError(
            416, "INVALID_PARAMETER_VALUE", "Requested range not satisfiable", {"Content-Range": f"bytes */{size}"}
        )
    return first, last


def write_atomically(target: Path, source: BinaryIO | bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.uploading")
    with open(partial, "wb") as sink:
        if isinstance(source, bytes):
            sink.write(source)
        else:
            shutil.copyfileobj(source, sink, COPY_CHUNK)
    os.replace(partial, target)


class Handler(BaseHTTPRequestHandler):
    """Routes one request to the Files API, the DBFS API or a presigned URL."""

    protocol_version = "HTTP/1.1"
    server: FakeDatabricksServer

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write("fake_databricks: " + (format % args) + "\n")

    # -- plumbing -----------------------------------------------------------------------------
    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _body(self) -> bytes:
        """The whole request body (JSON requests and parts), also when sent chunked."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        path = urllib.parse.unquote(url.path)
        self.status = 0
        workspace = self.server.workspace
        storage = self.server.role == "storage"
        # The workspace's limits cover its API; presigned URLs are cloud storage's, and /fake/ is the test's.
        limited = not storage and path.startswith("/api/")
        within = True
        if limited:
            with workspace.lock:
                within = workspace.limits.arrive(time.monotonic())
        body = b""
        try:
            body = self._body() if self.command in ("PUT", "POST", "PATCH", "DELETE") else b""
            self._route(url.path, path, query, body, storage, within)
        finally:
            if limited:
                with workspace.lock:
                    workspace.limits.leave()
        workspace.log(
            {
                "time": round(time.time(), 3),
                "server": self.server.role,
                "method": self.command,
                "path": path,
                "query": query,
                "range": self.headers.get("Range"),
                "status": self.status,
                "bytes_in": len(body),
            }
        )

    def _route(self, raw_path: str, path: str, query: dict[str, str], body: bytes, storage: bool, within: bool) -> None:
        workspace = self.server.workspace
        try:
            if storage:
                if not path.startswith(PRESIGNED_PREFIX):
                    raise StorageError(404, "NoSuchKey", "The specified key does not exist.")
                self._throttled(True)
                self._presigned(path[len(PRESIGNED_PREFIX) :], query, body)
            elif raw_path == "/.well-known/databricks-config":
                self._json(200, {"oidc_endpoint": f"http://{self.headers.get('Host')}/oidc", "workspace_id": "1"})
            elif raw_path.startswith("/fake/"):
                self._json(200, self._control(raw_path, query))
            else:
                if not within:
                    raise ApiError(
                        429,
                        "REQUEST_LIMIT_EXCEEDED",
                        "Too many requests: the workspace's request limit is exceeded. Please retry later.",
                        {"Retry-After": str(workspace.retry_after)},
                    )
                self._throttled(False)
                self._api(raw_path, path, query, body)
        except StorageError as err:
            xml = (
                f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{err.code}</Code><Message>{err.message}</Message>"
            )
            xml += "</Error>"
            self._send(err.status, xml.encode(), {"Content-Type": "application/xml", **err.headers})
        except ApiError as err:
            self._json(err.status, {"error_code": err.code, "message": err.message}, err.headers)

    def _control(self, raw_path: str, query: dict[str, str]) -> dict[str, object]:
        """The test's switches: `/fake/throttle`, `/fake/limits` and `/fake/storage` (POST sets, GET reports)."""
        workspace = self.server.workspace
        with workspace.lock:
            if raw_path == "/fake/throttle":
                workspace.throttle = Throttle(float(query.get("share", 0)), int(query.get("retry_after", 1)))
                return {}
            if raw_path == "/fake/limits":
                limits = workspace.limits
                if self.command == "POST":
                    limits.max_concurrent = int(query.get("max_concurrent", limits.max_concurrent))
                    limits.max_per_second = int(query.get("max_per_second", limits.max_per_second))
                    limits.most_in_flight, limits.refused = limits.in_flight, 0
                return {
                    "max_concurrent": limits.max_concurrent,
                    "max_per_second": limits.max_per_second,
                    "most_in_flight": limits.most_in_flight,
                    "refused": limits.refused,
                }
            if raw_path == "/fake/storage":
                faults = workspace.faults
                if self.command == "POST":
                    workspace.faults = faults = StorageFaults(
                        int(query.get("expire_every", 0)),
                        int(query.get("fail_every", 0)),
                        int(query.get("fail_status", 500)),
                        query.get("deny_downloads", "0") == "1",
                        query.get("deny_direct", "0") == "1",
                    )
                return {"expired": faults.expired, "failed": faults.failed, "parts": faults.parts}
        raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No fake control at {raw_path}")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _dispatch

    def _throttled(self, storage: bool) -> None:
        workspace = self.server.workspace
        with workspace.lock:
            status = workspace.throttle.hit()
        if status is None:
            return
        headers = {"Retry-After": str(workspace.throttle.retry_after)}
        if storage:
            raise StorageError(503, "SlowDown", "Please reduce your request rate.", headers)
        if status == 429:
            raise ApiError(429, "REQUEST_LIMIT_EXCEEDED", "Too many requests. Please retry later.", headers)
        raise ApiError(503, "TEMPORARILY_UNAVAILABLE", "The service is temporarily unavailable.", headers)

    def _authenticated(self) -> bool:
        """Whether the request carries the workspace's token (tests/servers/fake_workspace.py knows several)."""
        return self.headers.get("Authorization") == f"Bearer {self.server.workspace.token}"

    def _api(self, raw_path: str, path: str, query: dict[str, str], body: bytes) -> None:
        if not raw_path.startswith("/api/"):
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} {raw_path}'")
        if not self._authenticated():
            raise ApiError(401, "UNAUTHENTICATED", "Invalid access token.")
        if path.startswith(FILES_PREFIX + "/"):
            self._files(path[len(FILES_PREFIX) :], query, body)
        elif path.startswith(DIRS_PREFIX + "/"):
            self._directories(path[len(DIRS_PREFIX) :], query)
        elif path.startswith(DBFS_PREFIX):
            self._dbfs(path[len(DBFS_PREFIX) :], query, body)
        elif path == "/api/2.0/fs/create-upload-part-urls" and self.command == "POST":
            self._json(200, self._create_upload_part_urls(json.loads(body or b"{}")))
        elif path == "/api/2.0/fs/create-resumable-upload-url" and self.command == "POST":
            self._json(200, self._create_resumable_upload_url(json.loads(body or b"{}")))
        elif path == "/api/2.0/fs/create-abort-upload-url" and self.command == "POST":
            self._json(200, self._create_abort_upload_url(json.loads(body or b"{}")))
        elif path == "/api/2.0/fs/create-download-url" and self.command == "POST":
            self._json(200, self._create_download_url({**query, **json.loads(body or b"{}")}))
        else:
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} {raw_path}'")

    # -- Files API ------------------------------------------------------------------------------
    def _files(self, remote: str, query: dict[str, str], body: bytes) -> None:
        workspace = self.server.workspace
        target = workspace.in_volume(remote, file=True)
        if self.command == "PUT":
            with workspace.create_lock:
                self._check_writable_file(target, remote, parse_bool(query, "overwrite", True))
                write_atomically(target, body)
            self._send(204)
        elif self.command == "POST":
            action = query.get("action")
            if action == "initiate-upload":
                self._json(200, self._initiate_upload(remote, target, parse_bool(query, "overwrite", True)))
            elif action == "complete-upload":
                self._complete_upload(remote, query, json.loads(body or b"{}"))
                self._json(200, {})
            elif action == "abort-upload":
                token = query.get("session_token", "")
                workspace.upload(token, remote)
                workspace.finish_upload(token)
                self._json(200, {})
            else:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Unknown action: {action!r}")
        elif self.command in ("GET", "HEAD"):
            if not target.is_file():
                raise ApiError(404, "NOT_FOUND", f"The file being accessed is not found: {remote}")
            if self.command == "GET" and workspace.faults.deny_direct:
                raise ApiError(403, "PERMISSION_DENIED", "Direct downloads through the workspace are disabled")
            self._send_file(target, storage=False)
        elif self.command == "DELETE":
            if not target.is_file():
                raise ApiError(404, "NOT_FOUND", f"The file being accessed is not found: {remote}")
            target.unlink()
            self._send(204)

    @staticmethod
    def _check_writable_file(target: Path, remote: str, overwrite: bool) -> None:
        if target.is_dir():
            raise ApiError(409, "ALREADY_EXISTS", f"A directory exists at {remote}")
        if target.exists() and not overwrite:
            raise ApiError(409, "ALREADY_EXISTS", f"The file being created already exists: {remote}")
        for parent in target.parents:
            if parent.is_file():
                raise ApiError(409, "ALREADY_EXISTS", f"A parent of {remote} is a file")

    def _send_file(self, target: Path, *, storage: bool) -> None:
        stat = target.stat()
        size = stat.st_size
        headers = {
            "Content-Type": "application/octet-stream",
            "Last-Modified": email.utils.formatdate(stat.st_mtime, usegmt=True),
            "Accept-Ranges": "bytes",
        }
        since = self.headers.get("If-Unmodified-Since")
        if since:
            parsed = email.utils.parsedate_tz(since)
            if parsed is None or int(stat.st_mtime) > email.utils.mktime_tz(parsed):
                error = StorageError if storage else ApiError
                raise error(412, "PreconditionFailed" if storage else "FAILED_PRECONDITION", "The file changed")
        try:
            wanted = byte_range(self.headers.get("Range"), size) if self.command == "GET" else None
        except ApiError as err:
            raise (StorageError(416, "InvalidRange", err.message, err.headers) if storage else err) from None
        first, last = wanted or (0, size - 1)
        status = 200
        if wanted is not None:
            status = 206
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
        headers["Content-Length"] = str(max(0, last - first + 1))
        self._send(status, b"", headers)
        if self.command == "GET":
            with open(target, "rb") as source:
                source.seek(first)
                remaining = last - first + 1
                while remaining > 0 and (chunk := source.read(min(COPY_CHUNK, remaining))):
                    self.wfile.write(chunk)
                    remaining -= len(chunk)

    # -- multipart and resumable uploads ----------------------------------------------------------
    def _initiate_upload(self, remote: str, target: Path, overwrite: bool) -> dict:
        workspace = self.server.workspace
        self._check_writable_file(target, remote, overwrite)
        token = secrets.token_urlsafe(16)
        resumable = workspace.upload_style == "resumable"
        staging = workspace.staging / token
        staging.mkdir()
        with workspace.lock:
            workspace.uploads[token] = Upload(remote, target, overwrite, staging, resumable)
        return {"resumable_upload" if resumable else "multipart_upload": {"session_token": token}}

    def _create_upload_part_urls(self, args: dict) -> dict:
        workspace = self.server.workspace
        token = args.get("session_token", "")
        session = workspace.upload(token, args.get("path"))
        if session.resumable:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "This is a resumable upload session, not a multipart one")
        start, count = int(args.get("start_part_number", 0)), int(args.get("count", 0))
        if start < 1 or count < 1 or start + count - 1 > MAX_PART_NUMBER:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Part numbers run from 1 to {MAX_PART_NUMBER}")
        urls = []
        for number in range(start, start + count):
            url = workspace.presign(
                "upload-part", session.remote, args.get("expire_time"), session=token, part_number=number
            )
            urls.append({"part_number": number, **url})
        return {"upload_part_urls": urls}

    def _create_resumable_upload_url(self, args: dict) -> dict:
        workspace = self.server.workspace
        token = args.get("session_token", "")
        session = workspace.upload(token, args.get("path"))
        if not session.resumable:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "This is a multipart upload session, not a resumable one")
        url = workspace.presign("resumable", session.remote, None, session=token)
        return {"resumable_upload_url": url}

    def _create_abort_upload_url(self, args: dict) -> dict:
        workspace = self.server.workspace
        token = args.get("session_token", "")
        session = workspace.upload(token, args.get("path"))
        url = workspace.presign("abort", session.remote, args.get("expire_time"), session=token)
        return {"abort_upload_url": url}

    def _complete_upload(self, remote: str, query: dict[str, str], args: dict) -> None:
        workspace = self.server.workspace
        token = query.get("session_token", "")
        session = workspace.upload(token, remote)
        if query.get("upload_type") != "multipart" or session.resumable:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "complete-upload takes upload_type=multipart")
        parts = args.get("parts") or []
        numbers = [int(p.get("part_number", 0)) for p in parts]
        if not numbers or numbers != sorted(set(numbers)):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", "Parts must be listed once each, in ascending order")
        for part in parts:
            number = int(part["part_number"])
            if session.parts.get(number) != part.get("etag"):
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Part {number} was not uploaded or its ETag differs")
        for number in numbers[:-1]:
            if (session.staging / str(number)).stat().st_size < MIN_PART_SIZE:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Part {number} is smaller than the 5 MiB minimum")
        assembled = session.staging / "assembled"
        with open(assembled, "wb") as sink:
            for number in numbers:
                with open(session.staging / str(number), "rb") as source:
                    shutil.copyfileobj(source, sink, COPY_CHUNK)
        with workspace.create_lock:
            self._check_writable_file(session.target, remote, session.overwrite)
            session.target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(assembled, session.target)
        workspace.finish_upload(token)

    def _create_download_url(self, args: dict) -> dict:
        workspace = self.server.workspace
        remote = args.get("path", "")
        if not workspace.in_volume(remote, file=True).is_file():
            raise ApiError(404, "NOT_FOUND", f"The file being accessed is not found: {remote}")
        return workspace.presign("download", remote, args.get("expire_time"))

    # -- presigned URLs (cloud storage) ---------------------------------------------------------
    def _presigned(self, key: str, query: dict[str, str], body: bytes) -> None:
        workspace = self.server.workspace
        with workspace.lock:
            grant = workspace.presigned.get(key)
        if grant is None:
            raise StorageError(403, "AccessDenied", "Invalid presigned URL")
        if query.get("X-Amz-Signature") != grant.signature:
            raise StorageError(403, "SignatureDoesNotMatch", "The request signature we calculated does not match")
        if self.headers.get("Authorization"):
            raise StorageError(400, "InvalidArgument", "Only one auth mechanism allowed")
        if self.headers.get(SIGNATURE_HEADER) != grant.signature:
            raise StorageError(
                403, "SignatureDoesNotMatch", f"The request lacks the {SIGNATURE_HEADER} header it was signed with"
            )
        with workspace.lock:
            expire_now = workspace.faults.next_expires()
            if expire_now:
                grant.expires = 0.0  # an expired URL stays expired, as a real one does
        if time.time() > grant.expires:
            raise StorageError(403, "AccessDenied", "Request has expired")
        allowed = {"upload-part": "PUT", "resumable": "PUT DELETE", "abort": "DELETE", "download": "GET HEAD"}
        if self.command not in allowed[grant.action].split():
            raise StorageError(403, "AccessDenied", f"This URL does not allow {self.command}")
        if grant.action == "download":
            if workspace.faults.deny_downloads:
                raise StorageError(403, "AccessDenied", "Access Denied")
            target = workspace.local(grant.remote)
            if not target.is_file():
                raise StorageError(404, "NoSuchKey", "The specified key does not exist.")
            self._send_file(target, storage=True)
            return
        try:
            session = workspace.upload(grant.session)
        except ApiError:
            raise StorageError(404, "NoSuchUpload", "The specified upload does not exist.") from None
        if self.command == "DELETE":
            workspace.finish_upload(grant.session)
            self._send(499 if session.resumable else 204)
        elif grant.action == "upload-part":
            with workspace.lock:
                fails = workspace.faults.next_part_fails()
                status = workspace.faults.fail_status
            if fails:
                code = "SlowDown" if status == 503 else "InternalError"
                raise StorageError(status, code, f"Part {grant.part_number} was not stored ({code}); retry it.")
            (session.staging / str(grant.part_number)).write_bytes(body)
            etag = '"' + hashlib.md5(body).hexdigest() + '"'
            session.parts[grant.part_number] = etag
            self._send(200, b"", {"ETag": etag})
        else:
            self._resumable_chunk(grant.session, session, body)

    def _resumable_chunk(self, token: str, session: Upload, body: bytes) -> None:
        """One `PUT` of a resumable upload: `Content-Range: bytes a-b/(total|*)` or the status query `bytes */*`."""
        spec = self.headers.get("Content-Range", "")
        data_file = session.staging / "data"
        match = re.fullmatch(r"bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)", spec.strip())
        if match is None:
            raise StorageError(400, "InvalidArgument", f"Invalid Content-Range: {spec!r}")
        first_text, last_text, total_text = match.groups()
        if first_text is not None:
            first, last = int(first_text), int(last_text)
            if last - first + 1 != len(body) or first > session.received:
                raise StorageError(400, "InvalidArgument", f"Content-Range {spec!r} does not match the upload")
            with open(data_file, "ab") as sink:
                sink.write(body[session.received - first :])
            session.received = max(session.received, last + 1)
        if total_text != "*" and session.received >= int(total_text):
            with self.server.workspace.create_lock:
                self._check_writable_file(session.target, session.remote, session.overwrite)
                session.target.parent.mkdir(parents=True, exist_ok=True)
                data_file.touch()
                os.replace(data_file, session.target)
            self.server.workspace.finish_upload(token)
            self._send(200)
            return
        self._send(308, b"", {"Range": f"bytes=0-{session.received - 1}"} if session.received else {})

    # -- directories ------------------------------------------------------------------------------
    def _directories(self, remote: str, query: dict[str, str]) -> None:
        target = self.server.workspace.in_volume(remote, file=False)
        if self.command == "PUT":
            for candidate in (target, *target.parents):
                if candidate.is_file():
                    raise ApiError(409, "ALREADY_EXISTS", f"A file exists at {remote} or one of its parents")
            target.mkdir(parents=True, exist_ok=True)
            self._send(204)
            return
        if not target.is_dir():
            raise ApiError(404, "NOT_FOUND", f"The directory being accessed is not found: {remote}")
        if self.command == "HEAD":
            self._send(200)
        elif self.command == "DELETE":
            if len([p for p in remote.split("/") if p]) == 4:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", f"The root of a volume cannot be deleted: {remote}")
            if any(target.iterdir()):
                raise ApiError(409, "DIRECTORY_NOT_EMPTY", f"The directory is not empty: {remote}")
            target.rmdir()
            self._send(204)
        else:
            self._json(200, self._page(remote, target, query))

    def _page(self, remote: str, target: Path, query: dict[str, str]) -> dict[str, object]:
        """One page of the listing, in name order; the token is the (opaque) last name served."""
        size = min(int(query.get("page_size") or self.server.workspace.page_size), self.server.workspace.page_size)
        if size < 1:
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"Invalid page_size: {query.get('page_size')!r}")
        after = ""
        if query.get("page_token"):
            try:
                after = base64.urlsafe_b64decode(query["page_token"].encode()).decode()
            except ValueError:
                raise ApiError(400, "INVALID_PARAMETER_VALUE", "Invalid page_token") from None
        entries = sorted(
            (p for p in target.iterdir() if not p.name.endswith(".uploading") and p.name > after), key=lambda p: p.name
        )
        contents = []
        for entry in entries[:size]:
            item: dict[str, object] = {
                "path": remote.rstrip("/") + "/" + entry.name + ("/" if entry.is_dir() else ""),
                "name": entry.name,
                "is_directory": entry.is_dir(),
                "last_modified": int(entry.stat().st_mtime * 1000),
            }
            if entry.is_file():
                item["file_size"] = entry.stat().st_size
            contents.append(item)
        page: dict[str, object] = {"contents": contents} if contents else {}
        if len(entries) > size:
            page["next_page_token"] = base64.urlsafe_b64encode(entries[size - 1].name.encode()).decode()
        return page

    # -- DBFS API -------------------------------------------------------------------------------
    def _dbfs(self, action: str, query: dict[str, str], body: bytes) -> None:
        args = {**query, **(json.loads(body) if body else {})}
        workspace = self.server.workspace
        handler = getattr(self, "_dbfs_" + action.replace("-", "_"), None)
        if handler is None:
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"No API found for '{self.command} {DBFS_PREFIX}{action}'")
        self._json(200, handler(workspace, args))

    @staticmethod
    def _status(remote: str, target: Path) -> dict[str, object]:
        stat = target.stat()
        return {
            "path": remote,
            "is_dir": target.is_dir(),
            "file_size": 0 if target.is_dir() else stat.st_size,
            "modification_time": int(stat.st_mtime * 1000),
        }

    @staticmethod
    def _existing(workspace: Workspace, remote: str) -> Path:
        target = workspace.local(remote)
        if not target.exists():
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"No file or directory exists on path {remote}.")
        return target

    def _dbfs_get_status(self, workspace: Workspace, args: dict) -> dict:
        return self._status(args["path"], self._existing(workspace, args["path"]))

    def _dbfs_list(self, workspace: Workspace, args: dict) -> dict:
        remote = args["path"]
        target = self._existing(workspace, remote)
        if target.is_file():
            return {"files": [self._status(remote, target)]}
        base = remote.rstrip("/")
        return {"files": [self._status(f"{base}/{p.name}", p) for p in sorted(target.iterdir())]}

    def _dbfs_mkdirs(self, workspace: Workspace, args: dict) -> dict:
        target = workspace.local(args["path"])
        if target.is_file():
            raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"A file exists at {args['path']}")
        target.mkdir(parents=True, exist_ok=True)
        return {}

    def _check_writable(self, target: Path, remote: str, overwrite: bool) -> None:
        """Call with `create_lock` held: a create-only write fails if the name exists or is claimed."""
        if (target.exists() or target in self.server.workspace.claimed) and not overwrite:
            raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"A file or directory already exists at {remote}.")

    def _dbfs_create(self, workspace: Workspace, args: dict) -> dict:
        target = workspace.local(args["path"])
        overwrite = bool(args.get("overwrite"))
        with workspace.create_lock:
            self._check_writable(target, args["path"], overwrite)
            with workspace.lock:
                handle = next(workspace.handle_ids)
                workspace.handles[handle] = (target, bytearray())
            if not overwrite:
                workspace.claimed[target] = handle
        return {"handle": handle}

    def _open_handle(self, workspace: Workspace, args: dict) -> tuple[Path, bytearray]:
        with workspace.lock:
            found = workspace.handles.get(int(args["handle"]))
        if found is None:
            raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"no open handle {args['handle']}")
        return found

    def _dbfs_add_block(self, workspace: Workspace, args: dict) -> dict:
        data = base64.b64decode(args["data"])
        if len(data) > READ_LIMIT:
            raise ApiError(400, "MAX_BLOCK_SIZE_EXCEEDED", "a block holds at most 1 MiB")
        self._open_handle(workspace, args)[1].extend(data)
        return {}

    def _dbfs_close(self, workspace: Workspace, args: dict) -> dict:
        target, data = self._open_handle(workspace, args)
        with workspace.lock:
            workspace.handles.pop(int(args["handle"]), None)
        with workspace.create_lock:
            if workspace.claimed.get(target) == int(args["handle"]):
                del workspace.claimed[target]
            write_atomically(target, bytes(data))
        return {}

    def _dbfs_put(self, workspace: Workspace, args: dict) -> dict:
        target = workspace.local(args["path"])
        with workspace.create_lock:
            self._check_writable(target, args["path"], bool(args.get("overwrite")))
            write_atomically(target, base64.b64decode(args.get("contents", "")))
        return {}

    def _dbfs_read(self, workspace: Workspace, args: dict) -> dict:
        target = self._existing(workspace, args["path"])
        if target.is_dir():
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"{args['path']} is a directory")
        offset = int(args.get("offset") or 0)
        length = min(int(args.get("length") or READ_LIMIT), READ_LIMIT)
        with open(target, "rb") as stream:
            stream.seek(offset)
            data = stream.read(length)
        return {"bytes_read": len(data), "data": base64.b64encode(data).decode()}

    def _dbfs_move(self, workspace: Workspace, args: dict) -> dict:
        source = self._existing(workspace, args["source_path"])
        target = workspace.local(args["destination_path"])
        with workspace.create_lock:
            self._check_writable(target, args["destination_path"], False)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
        return {}

    def _dbfs_delete(self, workspace: Workspace, args: dict) -> dict:
        target = workspace.local(args["path"])
        if not target.exists():
            return {}
        if target.is_dir():
            if not args.get("recursive") and any(target.iterdir()):
                raise ApiError(400, "IO_ERROR", f"{args['path']} is a non-empty directory")
            shutil.rmtree(target)
        else:
            target.unlink()
        return {}


class FakeDatabricksServer(ThreadingHTTPServer):
    """One of the two HTTP servers over one workspace state: `role` is `workspace` (the APIs) or `storage`
    (presigned URLs)."""

    daemon_threads = True
    request_queue_size = 64  # many tasks connect at once; the limits, not the listen backlog, must answer them

    def __init__(self, port: int, workspace: Workspace, role: str, handler: type[Handler] | None = None) -> None:
        super().__init__(("127.0.0.1", port), handler or Handler)
        self.workspace = workspace
        self.role = role


def volume_name(text: str) -> tuple[str, str, str]:
    parts = text.split(".")
    if len(parts) != 3 or not all(parts):
        raise argparse.ArgumentTypeError(f"a volume is catalog.schema.volume, got {text!r}")
    return parts[0], parts[1], parts[2]


def main(argv: list[str]) -> None:
    """Parse the command line and serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("root", type=Path)
    parser.add_argument("token")
    parser.add_argument("--volume", type=volume_name, action="append", default=[], help="catalog.schema.volume")
    parser.add_argument("--upload-style", choices=["multipart", "resumable"], default="multipart")
    parser.add_argument("--page-size", type=int, default=MAX_PAGE_SIZE, help="entries per listing page")
    parser.add_argument("--throttle", type=float, default=float(os.environ.get("FAKE_DATABRICKS_THROTTLE") or 0))
    parser.add_argument("--retry-after", type=int, default=1, help="seconds, sent with throttled answers")
    parser.add_argument("--max-concurrent", type=int, default=10, help="API requests in flight (0: no limit)")
    parser.add_argument("--max-per-second", type=int, default=100, help="API requests a second (0: no limit)")
    parser.add_argument("--storage-port", type=int, default=0, help="the presigned URLs' server (0: a free port)")
    parser.add_argument("--request-log", type=Path)
    options = parser.parse_args(argv)
    options.root.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(options.root, options.token, set(options.volume), options)
    storage = FakeDatabricksServer(options.storage_port, workspace, "storage")
    workspace.storage_host = f"127.0.0.1:{storage.server_address[1]}"
    threading.Thread(target=storage.serve_forever, name="storage", daemon=True).start()
    server = FakeDatabricksServer(options.port, workspace, "workspace")
    print(f"fake_databricks listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    print(f"fake_databricks storage listening on {workspace.storage_host}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
