"""A small stand-in for the OCI Object Storage native API, enough for the `oci` SDK's object calls.

Stdlib only; objects are kept in memory. Requests must carry the SDK's `Authorization: Signature ...`
header whose `keyId` equals the one given on the command line (`tenancy/user/fingerprint`), else 401
NotAuthenticated. The signature itself is not verified. Buckets are created with the SDK's `create_bucket`.

Run: `python fake_oci.py PORT NAMESPACE KEY_ID` (binds 127.0.0.1 only).
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import itertools
import json
import re
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OBJECT_PATH = re.compile(r"^/n/(?P<ns>[^/]+)/b/(?P<bucket>[^/]+)/(?P<kind>o|u)(?:/(?P<name>.+))?$")
BUCKET_PATH = re.compile(r"^/n/(?P<ns>[^/]+)/b(?:/(?P<bucket>[^/]*))?/?$")
KEY_ID = re.compile(r'keyId="(?P<key>[^"]*)"')


class OciError(Exception):
    """An error answer: HTTP status plus OCI's `code`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class StoredObject:
    """One object's bytes and metadata."""

    data: bytes
    modified: float = field(default_factory=time.time)

    @property
    def md5(self) -> str:
        return base64.b64encode(hashlib.md5(self.data).digest()).decode()

    @property
    def etag(self) -> str:
        return hashlib.sha1(self.data).hexdigest()


@dataclass
class Store:
    """Server state: buckets of objects and open multipart uploads."""

    namespace: str
    key_id: str
    buckets: dict[str, dict[str, StoredObject]] = field(default_factory=dict)
    uploads: dict[str, dict[int, bytes]] = field(default_factory=dict)
    upload_ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bucket(self, namespace: str, name: str) -> dict[str, StoredObject]:
        if namespace != self.namespace or name not in self.buckets:
            raise OciError(
                404,
                "BucketNotFound",
                f"Either the bucket named '{name}' does not exist in the "
                f"namespace '{namespace}' or you are not authorized to access it",
            )
        return self.buckets[name]


class Handler(BaseHTTPRequestHandler):
    """Routes one request of the Object Storage API."""

    protocol_version = "HTTP/1.1"
    server: FakeOciServer

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write("fake_oci: " + (format % args) + "\n")

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        headers = {"opc-request-id": "fake", **(headers or {})}
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        store = self.server.store
        try:
            found = KEY_ID.search(self.headers.get("Authorization") or "")
            if found is None or found["key"] != store.key_id:
                raise OciError(
                    401,
                    "NotAuthenticated",
                    "The required information to complete authentication was not provided or was incorrect.",
                )
            self._route(store, url.path, query, body)
        except OciError as err:
            self._json(err.status, {"code": err.code, "message": err.message})

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _dispatch

    def _route(self, store: Store, path: str, query: dict[str, str], body: bytes) -> None:
        if path in ("/n", "/n/"):
            self._json(200, store.namespace)
            return
        match = OBJECT_PATH.match(path)
        if match:
            bucket = store.bucket(match["ns"], match["bucket"])
            name = urllib.parse.unquote(match["name"] or "")
            if match["kind"] == "u":
                self._multipart(store, bucket, name, query, body)
            elif name:
                with store.lock:  # a conditional PUT checks and stores in one step, as the real service does
                    self._object(bucket, name, body)
            elif self.command == "GET":
                self._list(bucket, query)
            else:
                raise OciError(405, "MethodNotAllowed", f"{self.command} {path}")
            return
        match = BUCKET_PATH.match(path)
        if match and self.command == "POST" and not match["bucket"]:
            self._create_bucket(store, match["ns"], json.loads(body))
        elif match and self.command in ("HEAD", "GET"):
            store.bucket(match["ns"], match["bucket"])
            self._json(200, {"name": match["bucket"], "namespace": match["ns"]}, {"ETag": "bucket"})
        else:
            raise OciError(404, "NotFound", f"no such endpoint: {self.command} {path}")

    def _create_bucket(self, store: Store, namespace: str, spec: dict) -> None:
        name = spec["name"]
        with store.lock:
            if namespace != store.namespace:
                raise OciError(404, "NamespaceNotFound", f"namespace {namespace} not found")
            if name in store.buckets:
                raise OciError(409, "BucketAlreadyExists", f"Bucket {name} already exists")
            store.buckets[name] = {}
        self._json(
            200, {"name": name, "namespace": namespace, "compartmentId": spec.get("compartmentId")}, {"ETag": "bucket"}
        )

    def _object(self, bucket: dict[str, StoredObject], name: str, body: bytes) -> None:
        if self.command == "PUT":
            self._check_preconditions(bucket.get(name), name)
            bucket[name] = StoredObject(body)
            self._send(200, headers={"ETag": bucket[name].etag, "opc-content-md5": bucket[name].md5})
            return
        stored = bucket.get(name)
        if stored is None:
            raise OciError(404, "ObjectNotFound", f"The object '{name}' was not found in the bucket")
        if self.command == "DELETE":
            del bucket[name]
            self._send(204)
            return
        headers = {
            "Content-Type": "application/octet-stream",
            "ETag": stored.etag,
            "Content-MD5": stored.md5,
            "Last-Modified": email.utils.formatdate(stored.modified, usegmt=True),
            "Accept-Ranges": "bytes",
            "version-id": "1",
            "storage-tier": "Standard",
        }
        spec = self.headers.get("Range")
        if spec and spec.startswith("bytes=") and self.command == "GET":
            first_text, _, last_text = spec[len("bytes=") :].partition("-")
            first = int(first_text)
            last = min(int(last_text) if last_text else len(stored.data) - 1, len(stored.data) - 1)
            headers["Content-Range"] = f"bytes {first}-{last}/{len(stored.data)}"
            self._send(206, stored.data[first : last + 1], headers)
            return
        headers["Content-Length"] = str(len(stored.data))
        self._send(200, stored.data, headers)

    def _check_preconditions(self, stored: StoredObject | None, name: str) -> None:
        """PutObject's ``if-none-match: *`` (create only: 409 IfNoneMatchFailed) and ``if-match: <etag>``
        (replace only that version: 412 NoEtagMatch), as the Object Storage API answers them."""
        if self.headers.get("if-none-match") == "*" and stored is not None:
            raise OciError(409, "IfNoneMatchFailed", f"The object '{name}' already exists (If-None-Match: *)")
        expected = self.headers.get("if-match")
        if expected is not None and (stored is None or stored.etag != expected):
            raise OciError(412, "NoEtagMatch", f"The ETag of '{name}' does not match the If-Match header")

    def _list(self, bucket: dict[str, StoredObject], query: dict[str, str]) -> None:
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        start = query.get("start", "")
        limit = int(query.get("limit") or 1000)
        objects: list[dict[str, object]] = []
        prefixes: set[str] = set()
        next_start = None
        for name in sorted(n for n in bucket if n.startswith(prefix) and n >= start):
            rest = name[len(prefix) :]
            if delimiter and delimiter in rest:
                prefixes.add(prefix + rest.split(delimiter, 1)[0] + delimiter)
                continue
            if len(objects) == limit:
                next_start = name
                break
            stored = bucket[name]
            objects.append(
                {
                    "name": name,
                    "size": len(stored.data),
                    "md5": stored.md5,
                    "etag": stored.etag,
                    "timeCreated": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(stored.modified)),
                }
            )
        page: dict[str, object] = {"objects": objects, "prefixes": sorted(prefixes)}
        if next_start is not None:
            page["nextStartWith"] = next_start
        self._json(200, page)

    def _multipart(
        self, store: Store, bucket: dict[str, StoredObject], name: str, query: dict[str, str], body: bytes
    ) -> None:
        if self.command == "POST" and not name:
            upload_id = f"upload-{next(store.upload_ids)}"
            store.uploads[upload_id] = {}
            spec = json.loads(body)
            self._json(
                200,
                {
                    "uploadId": upload_id,
                    "object": spec["object"],
                    "bucket": "",
                    "namespace": store.namespace,
                    "timeCreated": "2026-01-01T00:00:00.000Z",
                },
            )
            return
        parts = store.uploads.get(query.get("uploadId", ""))
        if parts is None:
            raise OciError(404, "NoSuchUpload", f"upload {query.get('uploadId')} not found")
        if self.command == "PUT":
            parts[int(query["uploadPartNum"])] = body
            self._send(200, headers={"ETag": hashlib.sha1(body).hexdigest()})
        elif self.command == "POST":
            order = [int(p["partNum"]) for p in json.loads(body)["partsToCommit"]]
            bucket[name] = StoredObject(b"".join(parts[n] for n in sorted(order)))
            del store.uploads[query["uploadId"]]
            self._send(200, headers={"ETag": bucket[name].etag})
        elif self.command == "DELETE":
            del store.uploads[query["uploadId"]]
            self._send(204)


class FakeOciServer(ThreadingHTTPServer):
    """The HTTP server, holding the object store."""

    daemon_threads = True

    def __init__(self, port: int, namespace: str, key_id: str) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.store = Store(namespace, key_id)


def main(argv: list[str]) -> None:
    """Parse `PORT NAMESPACE KEY_ID` and serve until killed."""
    if len(argv) != 3:
        raise SystemExit("usage: fake_oci.py PORT NAMESPACE KEY_ID")
    server = FakeOciServer(int(argv[0]), argv[1], argv[2])
    print(f"fake_oci listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
