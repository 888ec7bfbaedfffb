"""`download_file`: fetch one remote object to a local file, atomically, with retries and backoff."""

from __future__ import annotations

import logging
import time

from streaming.storage.base import storage_for
from streaming.storage.errors import ObjectNotFoundError, StoragePermissionError
from streaming.storage.retry import backoff_delay

logger = logging.getLogger(__name__)

#: Failures that another attempt cannot fix: a missing object, a permission or credential problem, a bad URL.
PERMANENT = (ObjectNotFoundError, StoragePermissionError, ValueError, ImportError)


def download_file(remote_url: str, local_path: str, *, retry: int = 2, timeout: float = 60.0,
                  initial_backoff: float = 1.0, max_jitter: float = 0.5) -> None:
    """Download `remote_url` to `local_path` in at most `retry` attempts (upstream's `download_retry`).

    The file appears under `local_path` only once complete. After a failed attempt `i` the backend drops
    its clients (the next attempt reconnects) and the call sleeps `initial_backoff * 2**i` plus up to
    `max_jitter` seconds. Permanent failures (`PERMANENT`) are raised at once. `timeout` bounds each request.
    """
    if retry < 1:
        raise ValueError(f"retry (total download attempts) must be at least 1, got {retry}.")
    for attempt in range(retry):
        storage = storage_for(remote_url)
        try:
            storage.get(remote_url, local_path, timeout=timeout)
            return
        except PERMANENT:
            raise
        except Exception as exc:
            if attempt + 1 == retry:
                raise
            storage.reset()
            delay = backoff_delay(attempt, initial_backoff, max_jitter)
            logger.info("download of %s failed (%s: %s); attempt %d/%d, retrying in %.2f s", remote_url,
                        type(exc).__name__, exc, attempt + 1, retry, delay)
            time.sleep(delay)
