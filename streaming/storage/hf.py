"""`hf://datasets/<org>/<repo>[@<revision>]/<path>`: a Hugging Face Hub dataset repository, through `huggingface_hub`.

Listing, sizes, uploads and deletes go through `HfApi` (one commit per uploaded or deleted file, like upstream's
uploader). Downloads stream the file's `resolve` URL through huggingface_hub's own HTTP session, headers and error
mapping, straight into the caller's temporary file: unlike `hf_hub_download` this keeps no second copy in the Hub
cache, writes no `.cache/` folder next to the shards, and leaves retrying to the caller.

Environment: `HF_TOKEN` (else the token of `huggingface-cli login`), `HF_ENDPOINT` (a private Hub or a mirror;
read on every backend build, whereas huggingface_hub itself reads it only once at import).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import quote, unquote

from streaming._extras import require
from streaming.storage.base import CHUNK_SIZE, Storage
from streaming.storage.errors import (
    CredentialsError,
    EndpointUnreachableError,
    ObjectNotFoundError,
    StorageError,
    StoragePermissionError,
)
from streaming.storage.url import split_url

REPO_TYPE = "dataset"
DEFAULT_REVISION = "main"
TOKEN_HINT = "HF_TOKEN (a token with read access, or write access to upload)"


@dataclass(frozen=True)
class HubPath:
    """Where an `hf://` URL points: the dataset repository, its revision, and the path inside it."""

    repo_id: str
    revision: str
    path: str

    def url(self, path: str) -> str:
        revision = "" if self.revision == DEFAULT_REVISION else f"@{self.revision}"
        return f"hf://datasets/{self.repo_id}{revision}/{path}"


def parse_hub_url(url: str) -> HubPath:
    """Split `hf://datasets/<org>/<repo>[@<revision>]/<path>`; anything else raises ValueError naming the form."""
    location = split_url(url)
    parts = location.key.split("/", 2)
    if location.netloc != "datasets" or len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(
            f"Unsupported Hugging Face URL {url!r}: expected hf://datasets/<org>/<repo>/<path> "
            "(only dataset repositories hold MDS data)."
        )
    name, _, revision = parts[1].partition("@")
    return HubPath(f"{parts[0]}/{name}", unquote(revision) or DEFAULT_REVISION, parts[2] if len(parts) > 2 else "")


def _transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP library's connection and timeout errors (`httpx2` in huggingface_hub 2.x, `httpx` in 1.x)."""
    found: list[type[Exception]] = []
    for module in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(module).TransportError)
        except ImportError:
            continue
    return tuple(found)


class HFStorage(Storage):
    """Dataset repositories on one Hub endpoint; huggingface_hub's HTTP client is shared by threads."""

    env_vars = ("HF_TOKEN", "HF_ENDPOINT")

    def __init__(self, *, token: str | None = None, endpoint: str | None = None) -> None:
        self._token = token
        self._endpoint = endpoint.rstrip("/") if endpoint else None
        self._api: Any = None

    @classmethod
    def from_url(cls, url: str) -> HFStorage:
        return cls(token=os.environ.get("HF_TOKEN") or None, endpoint=os.environ.get("HF_ENDPOINT") or None)

    @staticmethod
    def cache_key(url: str) -> str:
        return ""

    def _hub(self) -> Any:
        if self._api is None:
            hub = require("huggingface_hub", "hf", "Hugging Face Hub storage")
            self._api = hub.HfApi(endpoint=self._endpoint, token=self._token)
        return self._api

    # -- operations -----------------------------------------------------------------------------
    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        api = self._hub()
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        where = parse_hub_url(url)
        # Built from the client's endpoint rather than with `hf_hub_url`, whose URL template is fixed when
        # huggingface_hub is first imported (a later HF_ENDPOINT would be ignored).
        file_url = (
            f"{api.endpoint.rstrip('/')}/datasets/{where.repo_id}/resolve/"
            f"{quote(where.revision, safe='')}/{quote(where.path)}"
        )
        headers = build_hf_headers(token=self._token, library_name="mds-streaming")
        with get_session().stream("GET", file_url, headers=headers, timeout=timeout) as response:
            hf_raise_for_status(response)
            for chunk in response.iter_bytes(CHUNK_SIZE):
                sink.write(chunk)
            length = response.headers.get("Content-Length")
            encoded = response.headers.get("Content-Encoding", "identity") != "identity"
        return int(length) if length is not None and not encoded else None

    def _upload(self, local_path: str, url: str) -> None:
        where = parse_hub_url(url)
        self._hub().upload_file(
            path_or_fileobj=local_path,
            path_in_repo=where.path,
            repo_id=where.repo_id,
            repo_type=REPO_TYPE,
            revision=where.revision,
            commit_message=f"Upload {where.path}",
        )

    def _list(self, prefix_url: str) -> Iterator[str]:
        api = self._hub()
        from huggingface_hub.errors import RemoteEntryNotFoundError
        from huggingface_hub.hf_api import RepoFile

        where = parse_hub_url(prefix_url)
        folder = where.path.strip("/")
        try:
            entries = list(
                api.list_repo_tree(
                    where.repo_id,
                    path_in_repo=folder or None,
                    recursive=True,
                    repo_type=REPO_TYPE,
                    revision=where.revision,
                )
            )
        except RemoteEntryNotFoundError:
            return
        for entry in entries:
            if isinstance(entry, RepoFile):
                yield where.url(entry.path)

    def _size(self, url: str) -> int | None:
        api = self._hub()
        from huggingface_hub.errors import RemoteEntryNotFoundError, RepositoryNotFoundError
        from huggingface_hub.hf_api import RepoFile

        where = parse_hub_url(url)
        try:
            found = api.get_paths_info(where.repo_id, [where.path], repo_type=REPO_TYPE, revision=where.revision)
        except (RemoteEntryNotFoundError, RepositoryNotFoundError):
            return None
        for entry in found:
            if isinstance(entry, RepoFile) and entry.path == where.path:
                return int(entry.size)
        return None

    def _delete(self, url: str) -> None:
        api = self._hub()
        from huggingface_hub.errors import RemoteEntryNotFoundError

        where = parse_hub_url(url)
        try:
            api.delete_file(
                where.path,
                where.repo_id,
                repo_type=REPO_TYPE,
                revision=where.revision,
                commit_message=f"Delete {where.path}",
            )
        except RemoteEntryNotFoundError:
            pass

    # -- errors ---------------------------------------------------------------------------------
    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        from huggingface_hub import errors

        endpoint = self._endpoint or "the Hugging Face Hub"
        try:
            repo = parse_hub_url(url).repo_id
        except ValueError:
            return None
        if isinstance(exc, errors.GatedRepoError):
            return StoragePermissionError(
                url, f"dataset {repo!r} is gated; accept its conditions on the Hub, and set {TOKEN_HINT}"
            )
        if isinstance(exc, errors.RepositoryNotFoundError):
            return ObjectNotFoundError(
                url,
                f"dataset repository {repo!r} not found at {endpoint}; check the name, and for a private "
                f"repository set {TOKEN_HINT}",
            )
        if isinstance(exc, errors.RevisionNotFoundError):
            return ObjectNotFoundError(url, f"revision {parse_hub_url(url).revision!r} of dataset {repo!r} not found")
        if isinstance(exc, errors.RemoteEntryNotFoundError):
            return self._not_found(url)
        if isinstance(exc, errors.HfHubHTTPError) and exc.response is not None:
            status = exc.response.status_code
            if status == 401:
                return CredentialsError(
                    url,
                    f"{endpoint} refused the request as not authenticated (401: no token, or an invalid or "
                    f"expired one); check {TOKEN_HINT}",
                )
            if status == 403:
                return StoragePermissionError(
                    url, f"access denied (403); check that the token ({TOKEN_HINT}) may write to dataset {repo!r}"
                )
            return None
        if isinstance(exc, (*_transport_errors(), errors.OfflineModeIsEnabled)):
            return EndpointUnreachableError(
                url, f"cannot reach {endpoint} ({type(exc).__name__}); check HF_ENDPOINT (if set) and the network"
            )
        return None
