"""A small stand-in for the Databricks Files API 2.0 (`/Volumes/...`) and DBFS API 2.0 (`dbfs:/...`).

Stdlib only. Files live under a root directory on disk (the remote path `/a/b` is `<root>/a/b`). Every
`/api/` request must carry `Authorization: Bearer <token>`, else 401. A path with a segment named
`forbidden` answers 403 PERMISSION_DENIED, so clients can be tested against a permission error.
Endpoints the fake does not implement answer 404 (never 5xx or 429, which the SDK would retry for minutes).

Run: `python fake_databricks.py PORT ROOT TOKEN` (binds 127.0.0.1 only).
"""

from __future__ import annotations

import base64
import email.utils
import itertools
import json
import os
import shutil
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FILES_PREFIX = "/api/2.0/fs/files"
DIRS_PREFIX = "/api/2.0/fs/directories"
DBFS_PREFIX = "/api/2.0/dbfs/"
READ_LIMIT = 1 << 20


class ApiError(Exception):
    """An error answer: HTTP status plus the Databricks `error_code`."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Workspace:
    """The server's state: the file tree on disk and the open DBFS upload handles."""

    def __init__(self, root: Path, token: str) -> None:
        self.root = root
        self.token = token
        self.handles: dict[int, tuple[Path, bytearray]] = {}
        self.handle_ids = itertools.count(1)
        self.lock = threading.Lock()

    def local(self, remote_path: str) -> Path:
        """Map an absolute remote path onto the root; reject escapes and forbidden segments."""
        if not remote_path.startswith("/"):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"path must be absolute: {remote_path!r}")
        parts = [p for p in remote_path.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ApiError(400, "INVALID_PARAMETER_VALUE", f"invalid path: {remote_path!r}")
        if "forbidden" in parts:
            raise ApiError(403, "PERMISSION_DENIED", f"User does not have permission on {remote_path}")
        return self.root.joinpath(*parts)


class Handler(BaseHTTPRequestHandler):
    """Routes one request to the Files API or the DBFS API."""

    protocol_version = "HTTP/1.1"
    server: FakeDatabricksServer

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write("fake_databricks: " + (format % args) + "\n")

    # -- plumbing -----------------------------------------------------------------------------
    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: object) -> None:
        self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        body = self._body() if self.command in ("PUT", "POST", "PATCH") else b""
        try:
            if url.path == "/.well-known/databricks-config":
                self._json(200, {"oidc_endpoint": f"http://{self.headers.get('Host')}/oidc", "workspace_id": "1"})
                return
            if not url.path.startswith("/api/"):
                raise ApiError(404, "NOT_FOUND", f"no such endpoint: {url.path}")
            if self.headers.get("Authorization") != f"Bearer {self.server.workspace.token}":
                raise ApiError(401, "UNAUTHENTICATED", "Invalid access token.")
            path = urllib.parse.unquote(url.path)
            if path.startswith(FILES_PREFIX + "/"):
                self._files(path[len(FILES_PREFIX) :], query, body)
            elif path.startswith(DIRS_PREFIX + "/"):
                self._directories(path[len(DIRS_PREFIX) :], query)
            elif path.startswith(DBFS_PREFIX):
                self._dbfs(path[len(DBFS_PREFIX) :], query, body)
            else:
                raise ApiError(404, "NOT_FOUND", f"no such endpoint: {url.path}")
        except ApiError as err:
            self._json(err.status, {"error_code": err.code, "message": err.message})

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _dispatch

    # -- Files API ------------------------------------------------------------------------------
    def _files(self, remote: str, query: dict[str, str], body: bytes) -> None:
        target = self.server.workspace.local(remote)
        if self.command == "PUT":
            if target.is_dir():
                raise ApiError(409, "ALREADY_EXISTS", f"{remote} is a directory")
            if target.exists() and query.get("overwrite", "false") != "true":
                raise ApiError(409, "ALREADY_EXISTS", f"The file being created already exists: {remote}")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".uploading")
            partial.write_bytes(body)
            os.replace(partial, target)
            self._send(204)
        elif self.command == "POST":
            raise ApiError(404, "NOT_FOUND", "multipart upload is not implemented by this server")
        elif self.command in ("GET", "HEAD"):
            if not target.is_file():
                raise ApiError(404, "NOT_FOUND", f"The file being accessed is not found: {remote}")
            self._send_file(target)
        elif self.command == "DELETE":
            if not target.is_file():
                raise ApiError(404, "NOT_FOUND", f"The file being accessed is not found: {remote}")
            target.unlink()
            self._send(204)

    def _send_file(self, target: Path) -> None:
        data = target.read_bytes() if self.command == "GET" else b""
        size = target.stat().st_size
        headers = {
            "Content-Type": "application/octet-stream",
            "Last-Modified": email.utils.formatdate(target.stat().st_mtime, usegmt=True),
            "Accept-Ranges": "bytes",
        }
        spec = self.headers.get("Range")
        if spec and spec.startswith("bytes=") and self.command == "GET":
            first_text, _, last_text = spec[len("bytes=") :].partition("-")
            first = int(first_text)
            last = min(int(last_text) if last_text else size - 1, size - 1)
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
            self._send(206, data[first : last + 1], headers)
            return
        headers["Content-Length"] = str(size)
        self._send(200, data, headers)

    def _directories(self, remote: str, query: dict[str, str]) -> None:
        target = self.server.workspace.local(remote)
        if self.command == "PUT":
            if target.is_file():
                raise ApiError(409, "ALREADY_EXISTS", f"{remote} is a file")
            target.mkdir(parents=True, exist_ok=True)
            self._send(204)
            return
        if not target.is_dir():
            raise ApiError(404, "NOT_FOUND", f"The directory being accessed is not found: {remote}")
        if self.command == "HEAD":
            self._send(200)
        elif self.command == "DELETE":
            if any(target.iterdir()):
                raise ApiError(400, "DIRECTORY_NOT_EMPTY", f"The directory is not empty: {remote}")
            target.rmdir()
            self._send(204)
        else:
            self._json(200, self._page(remote, target, query))

    def _page(self, remote: str, target: Path, query: dict[str, str]) -> dict[str, object]:
        entries = sorted(target.iterdir(), key=lambda p: p.name)
        size = int(query.get("page_size") or 1000)
        start = int(query.get("page_token") or 0)
        contents = []
        for entry in entries[start : start + size]:
            item: dict[str, object] = {
                "path": remote.rstrip("/") + "/" + entry.name,
                "name": entry.name,
                "is_directory": entry.is_dir(),
                "last_modified": int(entry.stat().st_mtime * 1000),
            }
            if entry.is_file():
                item["file_size"] = entry.stat().st_size
            contents.append(item)
        page: dict[str, object] = {"contents": contents}
        if start + size < len(entries):
            page["next_page_token"] = str(start + size)
        return page

    # -- DBFS API -------------------------------------------------------------------------------
    def _dbfs(self, action: str, query: dict[str, str], body: bytes) -> None:
        args = {**query, **(json.loads(body) if body else {})}
        workspace = self.server.workspace
        handler = getattr(self, "_dbfs_" + action.replace("-", "_"), None)
        if handler is None:
            raise ApiError(404, "ENDPOINT_NOT_FOUND", f"no such DBFS endpoint: {action}")
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
        if target.exists() and not overwrite:
            raise ApiError(400, "RESOURCE_ALREADY_EXISTS", f"A file or directory already exists at {remote}.")

    def _dbfs_create(self, workspace: Workspace, args: dict) -> dict:
        target = workspace.local(args["path"])
        self._check_writable(target, args["path"], bool(args.get("overwrite")))
        with workspace.lock:
            handle = next(workspace.handle_ids)
            workspace.handles[handle] = (target, bytearray())
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
        self._write(target, bytes(data))
        return {}

    @staticmethod
    def _write(target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".uploading")
        partial.write_bytes(data)
        os.replace(partial, target)

    def _dbfs_put(self, workspace: Workspace, args: dict) -> dict:
        target = workspace.local(args["path"])
        self._check_writable(target, args["path"], bool(args.get("overwrite")))
        self._write(target, base64.b64decode(args.get("contents", "")))
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
    """The HTTP server, holding the workspace state."""

    daemon_threads = True

    def __init__(self, port: int, root: Path, token: str) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.workspace = Workspace(root, token)


def main(argv: list[str]) -> None:
    """Parse `PORT ROOT TOKEN` and serve until killed."""
    if len(argv) != 3:
        raise SystemExit("usage: fake_databricks.py PORT ROOT TOKEN")
    root = Path(argv[1])
    root.mkdir(parents=True, exist_ok=True)
    server = FakeDatabricksServer(int(argv[0]), root, argv[2])
    print(f"fake_databricks listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
