"""Read phases over a local, uncompressed dataset: LocalDataset and StreamingDataset.

Each phase touches every sample it reads (computes its verification key) and checks the keys
against the generated inputs after the clock stops, so a fast but wrong reader shows up.
"""

from __future__ import annotations

import os
import time

import inputs
import numpy as np

RANDOM_READS = 2000


def _path(context, dataset: str) -> str:
    return os.path.join(context.scratch, dataset)


def local_sequential(context, schema: str, n: int, dataset: str, passes: int = 3) -> dict:
    """LocalDataset(local=...) then ds[0], ds[1], ... ds[len-1]; the fastest of `passes` passes."""
    from streaming import LocalDataset

    expected = inputs.expected_keys(context.inputs, schema, n)
    start = time.perf_counter()
    ds = LocalDataset(local=_path(context, dataset))
    construct_s = time.perf_counter() - start
    times, ok = [], True
    for _ in range(passes):
        start = time.perf_counter()
        keys = [inputs.key_of(schema, ds[i]) for i in range(len(ds))]
        times.append(time.perf_counter() - start)
        ok = ok and keys == expected
    return {
        "construct_s": construct_s,
        "seconds_each": times,
        "samples_per_s": len(expected) / min(times),
        "values_ok": ok,
    }


def local_random(context, schema: str, n: int, dataset: str) -> dict:
    """LocalDataset ds[i] latency over RANDOM_READS uniformly random indices (fixed seed)."""
    from streaming import LocalDataset

    return _random_latencies(LocalDataset(local=_path(context, dataset)), context, schema, n)


def streaming_random(context, schema: str, n: int, dataset: str) -> dict:
    """StreamingDataset(local=..., remote=None) ds[i] latency at the same indices as `local_random`."""
    from streaming import StreamingDataset

    ds = StreamingDataset(local=_path(context, dataset), remote=None, shuffle=False, batch_size=1)
    return _random_latencies(ds, context, schema, n)


def _random_latencies(ds, context, schema: str, n: int) -> dict:
    """p50/p99 of ds[i] over RANDOM_READS uniformly random indices (fixed seed); the first read apart."""
    expected = inputs.expected_keys(context.inputs, schema, n)
    indices = np.random.default_rng(99).integers(0, n, size=RANDOM_READS).tolist()
    latencies_ns, ok = [], True
    clock = time.perf_counter_ns
    for i in indices:
        start = clock()
        sample = ds[i]
        latencies_ns.append(clock() - start)
        ok = ok and inputs.key_of(schema, sample) == expected[i]
    latencies_us = np.asarray(latencies_ns[1:], dtype=np.float64) / 1e3
    return {
        "first_access_us": latencies_ns[0] / 1e3,
        "p50_us": float(np.percentile(latencies_us, 50)),
        "p99_us": float(np.percentile(latencies_us, 99)),
        "values_ok": ok,
    }


def streaming_iteration(context, schema: str, n: int, dataset: str, batch_size: int = 32, epochs: int = 2) -> dict:
    """StreamingDataset(local=..., batch_size=...) in this process, shuffle off: construction and
    first sample of epoch 1; throughput of the fastest of `epochs` epochs."""
    from streaming import StreamingDataset

    expected = inputs.expected_keys(context.inputs, schema, n)
    start = time.perf_counter()
    ds = StreamingDataset(local=_path(context, dataset), remote=None, shuffle=False, batch_size=batch_size)
    construct_s = time.perf_counter() - start
    times, first_sample_s, ok = [], None, True
    for _ in range(epochs):
        start = time.perf_counter()
        iterator = iter(ds)
        keys = [inputs.key_of(schema, next(iterator))]
        if first_sample_s is None:
            first_sample_s = time.perf_counter() - start
        keys.extend(inputs.key_of(schema, sample) for sample in iterator)
        times.append(time.perf_counter() - start)
        ok = ok and keys == expected
    return {
        "construct_s": construct_s,
        "first_sample_s": first_sample_s,
        "seconds_each": times,
        "samples_per_s": n / min(times),
        "values_ok": ok,
    }
