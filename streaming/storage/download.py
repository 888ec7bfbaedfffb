"""`download_file`: fetch one remote object to a local file, atomically, with retries and backoff."""

from __future__ import annotations

from streaming.storage.base import Storage
from streaming.storage.errors import ObjectNotFoundError, StoragePermissionError
from streaming.storage.registry import storage_for
from streaming.storage.retry import call_with_retry

#: Failures that another attempt cannot fix: a missing object, a permission or credential problem, a bad URL.
PERMANENT = (ObjectNotFoundError, StoragePermissionError, ValueError, ImportError)


def download_file(
    remote_url: str,
    local_path: str,
    *,
    retry: int = 2,
    timeout: float = 60.0,
    initial_backoff: float = 1.0,
    max_jitter: float = 0.5,
    max_bytes: int | None = None,
    durable: bool = True,
    storage: Storage | None = None,
) -> None:
    """Download `remote_url` to `local_path` in at most `retry` attempts (upstream's `download_retry`).

    The file appears under `local_path` only once complete. After a failed attempt `i` the backend drops
    its clients (the next attempt reconnects) and the call sleeps `initial_backoff * 2**i` plus up to
    `max_jitter` seconds. Permanent failures (`PERMANENT`) are raised at once. `timeout` bounds each request,
    `max_bytes` the object's size (a larger one stops the download and is not retried). `durable=False`
    skips the fsync before the rename (see `Storage.get`). ``storage`` is the backend to use instead of
    `storage_for`'s (a `LocalStorage.below` the dataset's folder, so a local remote follows no link below it).
    """
    if retry < 1:
        raise ValueError(f"retry (total download attempts) must be at least 1, got {retry}.")

    def backend() -> Storage:
        return storage_for(remote_url) if storage is None else storage

    call_with_retry(
        lambda: backend().get(remote_url, local_path, timeout=timeout, max_bytes=max_bytes, durable=durable),
        retry,
        initial_backoff=initial_backoff,
        max_jitter=max_jitter,
        permanent=PERMANENT,
        before_retry=lambda: backend().reset(),
    )
