"""The checks of `test_s3_native.py`, each run in a fresh interpreter (``python -m tests.remote.s3_native_checks
<check> <args>``): a process that made an awscrt client must not fork the rest of the test suite's children.

Each check prints one JSON line with what it saw; the test asserts on it.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from typing import Any


def fetch(url: str, size: str, directory: str) -> dict[str, Any]:
    """One object through the native path and through boto3's; which path ran each time, and the bytes."""
    from streaming.storage import s3_native, storage_for

    storage = storage_for(url)
    storage.get(url, os.path.join(directory, "native"), durable=False, max_bytes=int(size))
    native = s3_native.downloads
    storage.get(url, os.path.join(directory, "boto3"))  # durable: boto3's path
    with open(os.path.join(directory, "native"), "rb") as first, open(os.path.join(directory, "boto3"), "rb") as second:
        same = first.read() == second.read()
    return {"native_after_first": native, "native_after_second": s3_native.downloads, "same_bytes": same}


def fail(url: str, max_bytes: str, directory: str) -> dict[str, Any]:
    """The error a native-path download raises (its type and message), and how many native downloads ran."""
    from streaming.storage import s3_native, storage_for

    try:
        storage_for(url).get(
            url, os.path.join(directory, "shard"), durable=False, max_bytes=int(max_bytes) if max_bytes else None
        )
    except Exception as err:  # reported to the test, which checks its type
        return {"error": type(err).__name__, "message": str(err), "native": s3_native.downloads}
    return {"error": None, "native": s3_native.downloads}


def _count_native(batch: list) -> tuple[int, int]:
    from streaming.storage import s3_native

    return len(batch), s3_native.downloads


def epoch(remote: str, local: str, prepare_first: str) -> dict[str, Any]:
    """A DataLoader epoch with 2 workers; with ``prepare_first``, the main process fetches shard 0 natively before
    the workers fork. Reports the native count each worker saw and the parent's at the fork."""
    from torch.utils.data import DataLoader

    from streaming import StreamingDataset
    from streaming.storage import s3_native

    dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
    if prepare_first == "yes":
        os.environ["STREAMING_S3_NATIVE"] = "1"
        dataset.prepare_shard(0)
    at_fork = s3_native.downloads
    loader = DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=_count_native, timeout=120)
    samples, counts = 0, collections.Counter()
    for size, native in loader:
        samples += size
        counts[native] += 1
    return {"samples": samples, "at_fork": at_fork, "worker_counts": sorted(counts)}


if __name__ == "__main__":
    check, *arguments = sys.argv[1:]
    print(json.dumps({"fetch": fetch, "fail": fail, "epoch": epoch}[check](*arguments)))
