"""Physical references: what this machine does on the same bytes with no dataset library in between.

Each phase reads the uncompressed MDS dataset the reference wrote for the read scenarios (so the bytes are the very
shards a writer produces and a reader reads) and reports the same metric keys as the scenario it stands beside:

* `limit_iter`: one `mmap` per shard, then per sample its offsets and one `np.frombuffer` (tokens) or a slice
  (text, jpeg), and the same verification key the read phases compute: the floor of any sequential reader.
* `limit_random`: `ds[i]` without a library: locate the shard (`bisect`), read two offsets from the mapped
  table, decode into the sample dict, at the same random indices as `local_random` (the values are checked
  outside the clock, as the library's are).
* `limit_zstd`: zstd itself at the writer's level on all cores (`ZstdCompressor(threads=-1)`, one frame per shard)
  over the shard files: the bar of `MDSWriter(compression="zstd")`. Both samples/s and payload MB/s use the same
  payload as the write phase.
* `limit_write`: the same shard bytes written to new files (page cache): the bar of an uncompressed write.

Needs numpy and zstandard only; it never imports `streaming`.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import shutil
import time

import inputs
import numpy as np
from phase_read import RANDOM_READS

ZSTD_LEVEL = 3  # what `compression="zstd"` means


def _shard_paths(context, dataset: str) -> list[str]:
    root = os.path.join(context.scratch, dataset)
    with open(os.path.join(root, "index.json")) as f:
        shards = json.load(f)["shards"]
    return [os.path.join(root, shard["raw_data"]["basename"]) for shard in shards]


def _mapped(paths: list[str]) -> list[mmap.mmap]:
    maps = []
    for path in paths:
        with open(path, "rb") as f:
            maps.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    return maps


def _offsets(mapped: mmap.mmap) -> np.ndarray:
    count = int.from_bytes(mapped[:4], "little")
    return np.frombuffer(mapped, "<u4", count + 1, 4)


def _sample_at(schema: str, mapped: mmap.mmap, start: int, end: int) -> dict:
    """The sample at mapped[start:end] as a reader returns it (MDS layout: variable sizes, then columns sorted)."""
    if schema == "tokens":
        # u32 size, the ndarray shape header (one byte: ndim << 2 | width code; then the length, 1-D here), then
        # the int32 ids to the end. The length is read from the sample, as any reader of `ndarray:int32` must.
        width = 1 << (mapped[start + 4] & 3)
        count = int.from_bytes(mapped[start + 5 : start + 5 + width], "little")
        return {"tokens": np.frombuffer(mapped, np.int32, count, end - 4 * count)}
    number = int.from_bytes(mapped[start + 4 : start + 12], "little", signed=True)  # u32 size, then the int column
    if schema == "text":
        return {"text": mapped[start + 12 : end].decode(), "id": number}
    return {"image": mapped[start + 12 : end], "class": number}


def _key_at(schema: str, mapped: mmap.mmap, start: int, end: int) -> int:
    """The verification key of the sample at mapped[start:end]."""
    return inputs.key_of(schema, _sample_at(schema, mapped, start, end))


def limit_iter(context, schema: str, n: int, dataset: str, passes: int = 3, **_: object) -> dict:
    """Every sample in order through mmap + offsets; the fastest of `passes` passes."""
    expected = inputs.expected_keys(context.inputs, schema, n)
    maps = _mapped(_shard_paths(context, dataset))
    times, ok = [], True
    for _ in range(passes):
        start = time.perf_counter()
        keys = []
        for mapped in maps:
            bounds = _offsets(mapped).tolist()
            keys.extend(_key_at(schema, mapped, a, b) for a, b in zip(bounds[:-1], bounds[1:]))
        times.append(time.perf_counter() - start)
        ok = ok and keys == expected
    return {"seconds_each": times, "samples_per_s": n / min(times), "values_ok": ok}


def limit_random(context, schema: str, n: int, dataset: str, **_: object) -> dict:
    """Latency of one random lookup through mmap: shard by binary search, two offsets, decode."""
    expected = inputs.expected_keys(context.inputs, schema, n)
    indices = np.random.default_rng(99).integers(0, n, size=RANDOM_READS).tolist()
    maps = _mapped(_shard_paths(context, dataset))
    # The offset tables as uint32 views of the mappings (4-byte aligned): indexing one yields a Python int.
    tables = [memoryview(mapped).cast("B")[4 : 4 + 4 * len(_offsets(mapped))].cast("I") for mapped in maps]
    starts = np.cumsum([0] + [len(table) - 1 for table in tables]).tolist()
    latencies_ns, ok = [], True
    clock = time.perf_counter_ns
    for index in indices:
        began = clock()
        shard = bisect.bisect_right(starts, index) - 1
        local = index - starts[shard]
        table = tables[shard]
        sample = _sample_at(schema, maps[shard], table[local], table[local + 1])
        latencies_ns.append(clock() - began)
        # Checked outside the clock, as the library's `ds[i]` is.
        ok = ok and inputs.key_of(schema, sample) == expected[index]
    latencies_us = np.asarray(latencies_ns[1:], dtype=np.float64) / 1e3
    return {
        "p50_us": float(np.percentile(latencies_us, 50)),
        "p99_us": float(np.percentile(latencies_us, 99)),
        "values_ok": ok,
    }


def _payload_result(schema: str, n: int, context, times: list[float], out_bytes: int) -> dict:
    _, payload = inputs.samples(context.inputs, schema, n)
    best = min(times)
    return {
        "seconds_each": times,
        "samples_per_s": n / best,
        "payload_mb_per_s": payload / 1e6 / best,
        "out_mb": out_bytes / 1e6,
    }


def limit_zstd(context, schema: str, n: int, dataset: str, repeats: int = 3, **_: object) -> dict:
    """zstd level 3 on every core over each shard file (one frame per shard, as a writer makes), best of repeats."""
    import zstandard

    shards = []
    for path in _shard_paths(context, dataset):
        with open(path, "rb") as f:
            shards.append(f.read())
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=-1, write_content_size=True)
    times, out_bytes = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        out_bytes = sum(len(compressor.compress(shard)) for shard in shards)
        times.append(time.perf_counter() - start)
    return _payload_result(schema, n, context, times, out_bytes)


def limit_write(context, schema: str, n: int, dataset: str, repeats: int = 3, **_: object) -> dict:
    """The shard files' bytes written to new files in a fresh directory (no fsync, as a writer does)."""
    shards = []
    for path in _shard_paths(context, dataset):
        with open(path, "rb") as f:
            shards.append(f.read())
    out = os.path.join(context.scratch, f"limit-write-{os.getpid()}")
    times = []
    for _ in range(repeats):
        shutil.rmtree(out, ignore_errors=True)
        os.sync()
        start = time.perf_counter()
        os.makedirs(out)
        for number, shard in enumerate(shards):
            with open(os.path.join(out, f"shard.{number:05}.mds"), "wb") as f:
                f.write(shard)
        times.append(time.perf_counter() - start)
    shutil.rmtree(out, ignore_errors=True)
    return _payload_result(schema, n, context, times, sum(map(len, shards)))
