"""A stand-in for the Hugging Face Hub endpoints that `huggingface_hub` calls for dataset repositories.

Run: `python fake_hf_hub.py PORT TOKEN [PAGE_SIZE]`; point `HF_ENDPOINT` at `http://127.0.0.1:PORT`.

Endpoints, as huggingface_hub 2.x calls them (read from its source and checked by logging its requests):
* `POST /api/repos/create` `{"name", "organization", "type", "visibility"}`, 409 if the repository exists;
* `GET /api/datasets/<org>/<name>[/revision/<rev>]`: repository info with `sha` and `siblings`;
* `GET /api/datasets/<org>/<name>/tree/<rev>[/<path>]?recursive=&expand=`: a page of entries, the next page
  named by a `Link: <...>; rel="next"` header (the Hub pages at 1000 entries; PAGE_SIZE makes it smaller);
* `POST /api/datasets/<org>/<name>/paths-info/<rev>` (form: repeated `paths`): entries of the paths that exist;
* `POST /api/datasets/<org>/<name>/preupload/<rev>` (JSON): every file gets `uploadMode: "regular"`, with the
  blob id of the file already there (if any) as `oid`;
* `POST /api/datasets/<org>/<name>/commit/<rev>` (NDJSON: a header, then `file` / `deletedFile` /
  `deletedFolder` lines), one atomic commit;
* `GET|HEAD /datasets/<org>/<name>/resolve/<rev>/<path>`: the bytes, with `ETag` (the git blob id),
  `X-Repo-Commit`, `Content-Length`, `Accept-Ranges` and single `Range` requests (206 / 416).

As strict as the Hub: an `Authorization` header with any other token gets 401 "Invalid credentials in
Authorization header" on every endpoint; writes need the token; private repositories answer 401 with
`X-Error-Code: RepoNotFound` without it; missing repositories, revisions and files get 404 with
`X-Error-Code` `RepoNotFound`, `RevisionNotFound` or `EntryNotFound`. Every request is logged to stderr.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

API_ROUTE = re.compile(r"^/api/datasets/([^/]+/[^/]+)(?:/(tree|paths-info|preupload|commit|revision)/([^/]+)(/.*)?)?$")
RESOLVE_ROUTE = re.compile(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    """A dataset repository with one branch, `main`; every commit's file map is kept, so old shas resolve."""

    repo_id: str
    private: bool
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    head: str = ""

    def snapshot(self, revision: str) -> dict[str, bytes] | None:
        return self.commits.get(self.head if revision == "main" else revision)


class HubState:
    def __init__(self, token: str, page_size: int) -> None:
        self.token = token
        self.page_size = page_size
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()

    def commit(self, repo: Repo, files: dict[str, bytes]) -> str:
        sha = hashlib.sha1(f"{repo.repo_id}:{len(repo.commits)}:{time.time_ns()}".encode()).hexdigest()
        repo.commits[sha] = files
        repo.head = sha
        return sha


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def _entries(files: dict[str, bytes], folder: str, recursive: bool) -> list[dict]:
    """Tree entries below `folder` (directories first at each level, like the Hub), sorted by path."""
    prefix = folder.strip("/") + "/" if folder.strip("/") else ""
    found: dict[str, dict] = {}
    for path, data in files.items():
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix) :].split("/")
        for depth in range(1, len(parts)):
            directory = prefix + "/".join(parts[:depth])
            found.setdefault(
                directory, {"type": "directory", "oid": git_blob_id(directory.encode()), "path": directory}
            )
            if not recursive:
                break
        if recursive or len(parts) == 1:
            found[path] = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": path}
    return [found[key] for key in sorted(found)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HubServer

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else ''}\n")

    # -- plumbing -------------------------------------------------------------------------------
    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: object, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _error(self, error: HubError) -> None:
        headers = {"X-Error-Message": error.message}
        if error.code:
            headers["X-Error-Code"] = error.code
        self._json({"error": error.message}, error.status, headers)

    def _authenticated(self) -> bool:
        """Whether the request carries the valid token; a wrong one is refused at once, as the Hub does."""
        header = self.headers.get("Authorization")
        if header is None:
            return False
        if header != f"Bearer {self.server.state.token}":
            raise HubError(401, "Invalid credentials in Authorization header")
        return True

    def _repo(self, repo_id: str, authenticated: bool, write: bool = False) -> Repo:
        repo = self.server.state.repos.get(repo_id)
        if repo is None or (repo.private and not authenticated):
            status = 404 if authenticated else 401
            raise HubError(status, "Repository not found", "RepoNotFound")
        if write and not authenticated:
            raise HubError(401, "You must be authenticated to write to a repository")
        return repo

    def _snapshot(self, repo: Repo, revision: str) -> dict[str, bytes]:
        files = repo.snapshot(unquote(revision))
        if files is None:
            raise HubError(404, f"Invalid rev id: {unquote(revision)}", "RevisionNotFound")
        return files

    def _dispatch(self, handler) -> None:
        try:
            handler()
        except HubError as error:
            self._error(error)

    def do_GET(self) -> None:
        self._dispatch(self._get)

    def do_HEAD(self) -> None:
        self._dispatch(self._get)

    def do_POST(self) -> None:
        self._dispatch(self._post)

    # -- reads ----------------------------------------------------------------------------------
    def _get(self) -> None:
        parts = urlsplit(self.path)
        authenticated = self._authenticated()
        if parts.path == "/api/agent-harnesses":  # huggingface_hub's agent-detection registry: none known here
            return self._json({"standardEnvVars": [], "harnesses": {}})
        with self.server.state.lock:
            if match := RESOLVE_ROUTE.match(parts.path):
                return self._resolve(match, authenticated)
            match = API_ROUTE.match(parts.path)
            if match is None:
                raise HubError(404, f"Sorry, we can't find the page you are looking for: {parts.path}")
            repo_id, action, revision, rest = match.groups()
            repo = self._repo(repo_id, authenticated)
            if action is None or action == "revision":
                return self._info(repo, revision or "main")
            if action == "tree":
                return self._tree(repo, revision, unquote(rest or "").lstrip("/"), parse_qs(parts.query))
        raise HubError(405, f"{self.command} is not allowed on {parts.path}")

    def _info(self, repo: Repo, revision: str) -> None:
        files = self._snapshot(repo, revision)
        sha = repo.head if revision == "main" else unquote(revision)
        self._json(
            {
                "_id": git_blob_id(repo.repo_id.encode())[:24],
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": sha,
                "private": repo.private,
                "gated": False,
                "disabled": False,
                "siblings": [{"rfilename": path} for path in sorted(files)],
            }
        )

    def _tree(self, repo: Repo, revision: str, folder: str, query: dict[str, list[str]]) -> None:
        files = self._snapshot(repo, revision)
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        if folder and not any(path.startswith(folder.rstrip("/") + "/") for path in files):
            raise HubError(404, f'{folder} does not exist on "{unquote(revision)}"', "EntryNotFound")
        entries = _entries(files, folder, recursive)
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start : start + self.server.state.page_size]
        headers = {}
        if start + len(page) < len(entries):
            following = dict((key, values[0]) for key, values in query.items())
            following["cursor"] = str(start + len(page))
            link = urlsplit(self.path)._replace(query="&".join(f"{k}={quote(v)}" for k, v in following.items()))
            headers["Link"] = f'<http://{self.headers["Host"]}{link.geturl()}>; rel="next"'
        self._json(page, headers=headers)

    def _resolve(self, match: re.Match, authenticated: bool) -> None:
        repo_id, revision, path = match.groups()
        repo = self._repo(repo_id, authenticated)
        files = self._snapshot(repo, revision)
        path = unquote(path)
        if path not in files:
            raise HubError(404, "Entry not found", "EntryNotFound")
        data = files[path]
        headers = {
            "Content-Type": "application/octet-stream",
            "ETag": f'"{git_blob_id(data)}"',
            "X-Repo-Commit": repo.head if revision == "main" else unquote(revision),
            "Accept-Ranges": "bytes",
            "Content-Disposition": f'inline; filename="{path.rsplit("/", 1)[-1]}"',
        }
        wanted = self.headers.get("Range")
        if wanted is None:
            return self._send(200, data, headers)
        found = re.fullmatch(r"bytes=(\d*)-(\d*)", wanted.strip())
        if found is None or found.groups() == ("", ""):
            raise HubError(416, "Invalid range")
        first, last = found.groups()
        start = len(data) - int(last) if first == "" else int(first)
        end = len(data) - 1 if first == "" or last == "" else min(int(last), len(data) - 1)
        if start >= len(data) or start > end:
            self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
            return
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        self._send(206, data[start : end + 1], headers)

    # -- writes ---------------------------------------------------------------------------------
    def _post(self) -> None:
        parts = urlsplit(self.path)
        body = self._body()
        authenticated = self._authenticated()
        with self.server.state.lock:
            if parts.path == "/api/repos/create":
                return self._create(json.loads(body), authenticated)
            match = API_ROUTE.match(parts.path)
            if match is None or match.group(2) in (None, "tree", "revision"):
                raise HubError(404, f"Sorry, we can't find the page you are looking for: {parts.path}")
            repo_id, action, revision, _ = match.groups()
            if action == "paths-info":
                repo = self._repo(repo_id, authenticated)
                files = self._snapshot(repo, revision)
                wanted = parse_qs(body.decode()).get("paths", [])
                return self._json([entry for entry in _entries(files, "", True) if entry["path"] in wanted])
            repo = self._repo(repo_id, authenticated, write=True)
            if unquote(revision) != "main":
                raise HubError(400, "Commits are only accepted on the main branch of this fake")
            if action == "preupload":
                return self._preupload(repo, json.loads(body))
            return self._commit(repo, body)

    def _create(self, payload: dict, authenticated: bool) -> None:
        if not authenticated:
            raise HubError(401, "You must be authenticated to create a repository")
        if payload.get("type") != "dataset":
            raise HubError(400, "This fake serves dataset repositories only")
        repo_id = f"{payload.get('organization') or 'user'}/{payload['name']}"
        url = f"http://{self.headers['Host']}/datasets/{repo_id}"
        if repo_id in self.server.state.repos:
            message = "You already created this dataset repo"
            return self._json({"error": message, "url": url}, 409, {"X-Error-Message": message})
        # huggingface_hub 2.x sends "visibility" ("private", "protected", "public"); older clients "private": bool.
        repo = Repo(repo_id, payload.get("visibility", "public") != "public" or bool(payload.get("private")))
        self.server.state.commit(repo, {})
        self.server.state.repos[repo_id] = repo
        self._json({"url": url, "name": repo_id, "id": repo_id})

    def _preupload(self, repo: Repo, payload: dict) -> None:
        files = repo.commits[repo.head]
        answers = []
        for item in payload.get("files", []):
            existing = files.get(item["path"])
            answers.append(
                {
                    "path": item["path"],
                    "uploadMode": "regular",
                    "shouldIgnore": False,
                    "oid": git_blob_id(existing) if existing is not None else None,
                }
            )
        self._json({"files": answers, "commitOid": repo.head})

    def _commit(self, repo: Repo, body: bytes) -> None:
        if self.headers.get("Content-Type") != "application/x-ndjson":
            raise HubError(400, "Expected an application/x-ndjson body")
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The first line must be the commit header")
        header = lines[0]["value"]
        if header.get("parentCommit") not in (None, repo.head):
            raise HubError(412, "A commit has happened since the parent commit", "PreconditionFailed")
        files = dict(repo.commits[repo.head])
        for line in lines[1:]:
            key, value = line.get("key"), line.get("value", {})
            path = value.get("path", "").strip("/")
            if key == "file":
                if value.get("encoding") != "base64":
                    raise HubError(400, f"Unsupported encoding for {path}")
                files[path] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                if path not in files:
                    raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                del files[path]
            elif key == "deletedFolder":
                doomed = [name for name in files if name.startswith(path + "/")]
                if not doomed:
                    raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
                for name in doomed:
                    del files[name]
            else:
                raise HubError(400, f"Unsupported commit operation {key!r} (this fake only answers uploadMode regular)")
        sha = self.server.state.commit(repo, files)
        endpoint = f"http://{self.headers['Host']}"
        self._json({"success": True, "commitOid": sha, "commitUrl": f"{endpoint}/datasets/{repo.repo_id}/commit/{sha}"})


class HubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, state: HubState) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.state = state


def main() -> None:
    port, token = int(sys.argv[1]), sys.argv[2]
    page_size = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    HubServer(port, HubState(token, page_size)).serve_forever()


if __name__ == "__main__":
    main()
