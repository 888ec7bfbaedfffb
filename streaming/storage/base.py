"""The storage interface every backend implements (`Storage`), and the client pool backends keep their clients in.

A backend moves whole objects between a URL and a local file: `get`, `put`, `put_if_absent` (the
create-only write that concurrent writers' commits rely on), `list`, `exists`, `size` and `delete`, in
the spirit of fsspec's filesystem interface but much smaller. `get` always downloads to a temporary
name in the destination directory and renames it, so a partial download never appears under the real
name (and fsyncs first, unless the caller can recognise a copy torn by a power loss). Which backend serves
a URL is `streaming.storage.registry`'s to say.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast

from streaming._extras import explain_missing
from streaming.storage.errors import (
    DownloadTooLargeError,
    IncompleteTransferError,
    ObjectNotFoundError,
    StorageError,
    UnsupportedOperationError,
    scrubbed_cause,
)
from streaming.storage.url import split_url

DEFAULT_TIMEOUT = 60.0
CHUNK_SIZE = 1 << 20
_sync = getattr(os, "fdatasync", os.fsync)  # the data must be on disk before the rename publishes it


class Storage(ABC):
    """One storage location kind (a scheme, and for some schemes a bucket or account)."""

    #: Environment variables that configure this backend; a change gives a fresh backend from `storage_for`.
    env_vars: tuple[str, ...] = ()

    @classmethod
    def from_url(cls, url: str) -> Storage:
        """Build the backend serving `url` from the environment."""
        return cls()

    @staticmethod
    def cache_key(url: str) -> str:
        """Which URLs share one backend instance: by default those with the same netloc."""
        return split_url(url).netloc

    def get(
        self,
        url: str,
        local_path: str,
        *,
        timeout: float | None = None,
        max_bytes: int | None = None,
        durable: bool = True,
    ) -> None:
        """Download `url` to `local_path`, atomically: the file appears complete or not at all.

        With `max_bytes`, the download stops with `DownloadTooLargeError` as soon as more arrives. With
        `durable`, the data reaches the disk before the rename publishes it; without, a power loss can leave
        the file shorter than the object (a cache that checks sizes on use may skip the ~15 % that costs).
        """
        directory = os.path.dirname(os.path.abspath(local_path))
        os.makedirs(directory, exist_ok=True)
        timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        # The native path writes without an fsync, so it only takes the downloads that need none.
        if not durable and self._get_natively(url, local_path, timeout, max_bytes):
            return
        handle, temp_path = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(local_path)}.", suffix=".part")
        try:
            with os.fdopen(handle, "wb") as file:
                # `_LimitedSink` offers the few file methods the backends call (write, flush, fileno).
                sink = file if max_bytes is None else cast(BinaryIO, _LimitedSink(file, max_bytes, url))
                with self._errors(url):
                    written = self._download(url, sink, timeout)
                sink.flush()
                if durable:
                    _sync(sink.fileno())
            if written is not None and written != os.path.getsize(temp_path):
                raise IncompleteTransferError(
                    url, f"expected {written} bytes, received {os.path.getsize(temp_path)}; the download was cut short"
                )
            os.replace(temp_path, local_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp_path)
            raise

    def put(self, local_path: str, url: str) -> None:
        """Upload the local file `local_path` to `url`, replacing any object there."""
        if not os.path.isfile(local_path):
            raise FileNotFoundError(f"Cannot upload {local_path!r} to {url}: no such local file.")
        with self._errors(url):
            self._upload(local_path, url)

    def put_if_absent(self, local_path: str, url: str) -> bool:
        """Create `url` from `local_path` only if no object is there, atomically; False if one already was.

        Each backend uses its store's own create-only precondition, so of two writers racing for one name
        exactly one gets True (S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``, Azure and the Databricks
        APIs' no-overwrite uploads, OCI ``if-none-match: *``, ``link``/``O_EXCL`` on a filesystem).
        """
        if not os.path.isfile(local_path):
            raise FileNotFoundError(f"Cannot upload {local_path!r} to {url}: no such local file.")
        with self._errors(url):
            return self._upload_if_absent(local_path, url)

    def list(self, prefix_url: str) -> list[str]:
        """Every object below the directory `prefix_url` (recursively), as sorted full URLs."""
        with self._errors(prefix_url):
            return sorted(self._list(prefix_url))

    def exists(self, url: str) -> bool:
        """Whether the object `url` exists."""
        with self._errors(url):
            return self._size(url) is not None

    def size(self, url: str) -> int:
        """The size of the object `url` in bytes; ObjectNotFoundError if it does not exist."""
        with self._errors(url):
            found = self._size(url)
        if found is None:
            raise self._not_found(url)
        return found

    def modified(self, url: str) -> float:
        """When the object `url` was last written (POSIX seconds); ObjectNotFoundError if it does not exist."""
        with self._errors(url):
            found = self._modified(url)
        if found is None:
            raise self._not_found(url)
        return found

    def delete(self, url: str) -> None:
        """Delete the object `url`; deleting a missing object is not an error."""
        with self._errors(url):
            self._delete(url)

    def reset(self) -> None:
        """Drop this backend's clients and connections; the next call builds fresh ones."""
        pool = getattr(self, "_clients", None)
        if isinstance(pool, ClientPool):
            pool.clear()

    # -- to implement ---------------------------------------------------------------------------
    @abstractmethod
    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        """Write the object's bytes to `sink`; return the object's size if known (checked against the bytes)."""

    def _get_natively(self, url: str, local_path: str, timeout: float, max_bytes: int | None) -> bool:
        """Download `url` to `local_path` atomically outside the interpreter, if this backend can; False to have
        `_download` do it (the default). Never raises for the object itself: `_download` then reports it."""
        return False

    @abstractmethod
    def _upload(self, local_path: str, url: str) -> None:
        """Upload one local file."""

    def _upload_if_absent(self, local_path: str, url: str) -> bool:
        """Upload one local file unless the object exists; return whether this call created it."""
        raise UnsupportedOperationError(
            url,
            f"{type(self).__name__} offers no create-only write, so concurrent writers cannot commit here safely; "
            "write the dataset from one job at a time, or to a store that has one (local disk, S3, GCS, Azure, "
            "OCI, Databricks volumes)",
        )

    @abstractmethod
    def _list(self, prefix_url: str) -> Iterator[str]:
        """Yield the full URLs below the directory `prefix_url`."""

    @abstractmethod
    def _size(self, url: str) -> int | None:
        """The object's size, or None when it does not exist."""

    def _modified(self, url: str) -> float | None:
        """The object's last-modified time (POSIX seconds), or None when it does not exist."""
        raise NotImplementedError(f"{type(self).__name__} cannot tell when an object was last modified.")

    @abstractmethod
    def _delete(self, url: str) -> None:
        """Delete the object; ignore a missing one."""

    @abstractmethod
    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        """Turn a client library's exception into a StorageError subclass, or None to let it through."""

    def _not_found(self, url: str) -> StorageError:
        return ObjectNotFoundError(url, "object not found; check the path and that the data was written there")

    @contextlib.contextmanager
    def _errors(self, url: str) -> Iterator[None]:
        try:
            yield
        except ModuleNotFoundError as exc:
            # Its SDK is missing, whichever of its modules was imported first: name the extra that installs it.
            raise (explain_missing(exc, f"{type(self).__name__} for {url!r}") or exc) from exc
        except (StorageError, ImportError):
            raise
        except Exception as exc:
            mapped = self._classify(exc, url)
            cause = scrubbed_cause(exc)
            if mapped is None:
                if cause is exc:
                    raise
                # Not one this backend knows, but its chain quotes a credential: only a scrubbed copy goes on.
                mapped = StorageError(url, f"{type(exc).__name__}: {exc}")
            try:
                raise mapped from cause
            finally:
                if cause is not exc:  # the implicit context is the original too: drop it
                    mapped.__context__ = None

    def __repr__(self) -> str:  # never show client configuration (it may hold credentials)
        return f"<{type(self).__name__}>"


class _LimitedSink:
    """A file wrapper that refuses to receive more than `limit` bytes (a remote object that never ends)."""

    def __init__(self, file: BinaryIO, limit: int, url: str) -> None:
        self._file = file
        self._limit = limit
        self._url = url
        self._written = 0

    def write(self, data: bytes) -> int:
        self._written += len(data)
        if self._written > self._limit:
            raise DownloadTooLargeError(
                self._url, f"more than the {self._limit} bytes expected arrived; the download was stopped"
            )
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


class ClientPool:
    """Lazily built clients, one per (process, key) or per (process, thread, key) for non-thread-safe clients."""

    def __init__(self, factory: Callable[..., Any], *, per_thread: bool = False) -> None:
        self._factory = factory
        self._per_thread = per_thread
        self._clients: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def get(self, *key: Any) -> Any:
        """The client for `key` (passed to the factory), built on first use in this process/thread."""
        if os.getpid() != self._pid:
            # Inherited across a fork: the parent's clients (and possibly a held lock) are not ours.
            self._lock = threading.Lock()
            self._clients = {}
            self._pid = os.getpid()
        slot = (threading.get_ident() if self._per_thread else 0, key)
        client = self._clients.get(slot)
        if client is None:
            with self._lock:
                client = self._clients.get(slot)
                if client is None:
                    client = self._factory(*key)
                    self._clients[slot] = client
        return client

    def clear(self) -> None:
        """Forget every client (the next call builds fresh ones)."""
        with self._lock:
            self._clients = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"_factory": self._factory, "_per_thread": self._per_thread}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Clients (sockets, SDK sessions) are not picklable: a pool arrives empty and builds its own.
        ClientPool.__init__(self, state["_factory"], per_thread=state["_per_thread"])
