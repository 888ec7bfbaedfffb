"""A fault proxy in front of the S3 server: resets, truncated bodies and latency on 20 % of requests.

A full epoch with 4 DataLoader workers must yield every sample exactly as written, with no partial file
under a shard's name in the cache, and writes through the same proxy must either commit a complete
dataset or fail with a storage error and publish nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import numpy as np

from streaming import MDSWriter, StreamingDataset
from streaming.format.index import INDEX_BASENAME, parse_index, shard_files
from streaming.storage.errors import StorageError
from streaming.storage.registry import clear_storage_cache, storage_for
from tests.remotes import Remote

COLUMNS = {"id": "int64", "payload": "bytes"}
SAMPLES = 600
FAULT_RATE = 0.2


def _sample(i: int) -> dict:
    return {"id": i, "payload": np.random.default_rng(i).bytes(200 + i % 300)}


def _write(out: str, first: int, count: int) -> None:
    with MDSWriter(out=out, columns=COLUMNS, compression="zstd", hashes=["sha1"], size_limit=8_000) as writer:
        for i in range(first, first + count):
            writer.write(_sample(i))


def test_an_epoch_through_a_faulty_proxy_reads_every_sample_once(
    remote_factory: Callable[[str], Remote], tmp_path
) -> None:
    from torch.utils.data import DataLoader

    remote = remote_factory("s3")
    root = remote.url("dataset")
    _write(root, 0, SAMPLES)
    index = parse_index(_text(root + "/" + INDEX_BASENAME, tmp_path), root)
    proxy = remote.through_proxy()
    proxy.chaos(FAULT_RATE, seed=1)
    cache = tmp_path / "cache"
    dataset = StreamingDataset(remote=root, local=str(cache), batch_size=10, download_retry=8, download_timeout=20)
    seen: dict[int, bytes] = {}
    for batch in DataLoader(dataset, batch_size=10, num_workers=4, timeout=120):
        for i, payload in zip(batch["id"].tolist(), batch["payload"]):
            assert i not in seen, f"sample {i} was yielded twice"
            seen[i] = payload
    assert sorted(seen) == list(range(SAMPLES))
    assert all(seen[i] == _sample(i)["payload"] for i in seen), "a sample differs from what was written"
    _assert_no_partial_file(str(cache), index)
    assert proxy.requests > len(index) and sum(proxy.faults.values()) > 0
    _report("epoch", proxy, samples=len(seen))


def test_writes_through_a_faulty_proxy_commit_or_fail_cleanly(
    remote_factory: Callable[[str], Remote], tmp_path
) -> None:
    remote = remote_factory("s3")
    proxy = remote.through_proxy()
    outcomes = {"committed": 0, "failed": 0}
    for attempt in range(4):
        root = remote.url(f"written{attempt}")
        proxy.chaos(FAULT_RATE, seed=100 + attempt)
        failed = False
        try:
            _write(root, 0, 120)
        except StorageError as err:  # the storage error itself, naming the object
            assert "s3://" in str(err), f"the error does not name the URL: {err}"
            failed = True
        outcomes["failed" if failed else "committed"] += 1
        proxy.chaos(0)
        clear_storage_cache()
        storage = storage_for(root)
        if storage.exists(root + "/" + INDEX_BASENAME):
            shards = parse_index(_text(root + "/" + INDEX_BASENAME, tmp_path), root)
            dataset = StreamingDataset(remote=root, local=str(tmp_path / f"cache{attempt}"), download_retry=0)
            assert [int(dataset[i]["id"]) for i in range(dataset.num_samples)] == list(range(120))
            assert sum(shard["samples"] for shard in shards) == 120
        else:
            assert failed, "a write that reported success published no index"
    assert sum(proxy.faults.values()) > 0
    _report("writes", proxy, **outcomes)


def _text(url: str, scratch) -> str:
    path = os.path.join(str(scratch), "fetched.json")
    storage_for(url).get(url, path)
    with open(path, encoding="utf-8") as file:
        return file.read()


def _assert_no_partial_file(cache: str, index: list[dict]) -> None:
    sizes = {info["basename"]: info["bytes"] for entry in index for _, info in shard_files(entry)}
    for folder, _, names in os.walk(cache):
        for name in names:
            relative = os.path.relpath(os.path.join(folder, name), cache).replace(os.sep, "/")
            assert not name.endswith((".part", ".tmp")), f"a temporary download was left behind: {relative}"
            if relative in sizes:
                assert os.path.getsize(os.path.join(folder, name)) == sizes[relative], f"partial file {relative}"


def _report(what: str, proxy, **figures) -> None:
    line = {"what": what, "requests": proxy.requests, "faults": dict(proxy.faults), **figures}
    print("fault-proxy figures:", json.dumps(line, sort_keys=True))
