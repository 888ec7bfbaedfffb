"""StreamingDataset start-up and caching phases: many-shard construction and a local-dir remote.

Both use StreamingDataset only; until ours has it the driver leaves these scenarios off.
"""

from __future__ import annotations

import os
import shutil
import time

import inputs


def startup(context, shards: int, dataset: str) -> dict:
    """Construct over a dataset of `shards` one-sample shards, then fetch the first sample."""
    from streaming import StreamingDataset

    start = time.perf_counter()
    ds = StreamingDataset(local=os.path.join(context.scratch, dataset), remote=None, batch_size=1)
    constructed = time.perf_counter()
    sample = next(iter(ds))
    first = time.perf_counter()
    return {
        "construct_s": constructed - start,
        "first_sample_s": first - constructed,
        "values_ok": len(ds) == shards and int(sample["id"]) == 7,
    }


def remote_cold_warm(context, schema: str, n: int, remote: str, batch_size: int = 32) -> dict:
    """Epoch 1 from an empty cache (`remote` is a local directory), epoch 2 from the full one."""
    from streaming import StreamingDataset

    expected = inputs.expected_keys(context.inputs, schema, n)
    cache = os.path.join(context.scratch, f"cache-{context.side}-{os.getpid()}")
    shutil.rmtree(cache, ignore_errors=True)
    ds = StreamingDataset(
        remote=os.path.join(context.scratch, remote), local=cache, shuffle=False, batch_size=batch_size
    )
    result, ok = {}, True
    for epoch in ("cold", "warm"):
        start = time.perf_counter()
        keys = [inputs.key_of(schema, sample) for sample in ds]
        result[f"{epoch}_samples_per_s"] = len(keys) / (time.perf_counter() - start)
        ok = ok and keys == expected
    del ds
    shutil.rmtree(cache, ignore_errors=True)
    return {**result, "values_ok": ok}
