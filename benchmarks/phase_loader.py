"""Phases that read through a torch DataLoader: multi-worker throughput and mid-epoch resume.

Both need torch and the project's StreamingDataset/StreamingDataLoader; until ours has them the
driver leaves these scenarios off (see scenarios.py `requires`).
"""

from __future__ import annotations

import gc
import json
import os
import time

import inputs


def _batch_keys(schema: str, batch: dict) -> list[int]:
    """Verification keys of every sample in a default-collated batch."""
    if schema == "tokens":
        tokens = batch["tokens"]
        return (tokens[:, 0].long() * inputs.VOCAB + tokens[:, -1].long()).tolist()
    if schema == "text":
        return [int(i) for i in batch["id"]]
    pairs = zip(batch["image"], batch["class"], strict=True)
    return [len(image) * 1000 + int(label) for image, label in pairs]


def dataloader(context, schema: str, n: int, dataset: str, workers: int = 2, batch_size: int = 32) -> dict:
    """One epoch of DataLoader(StreamingDataset(local=...), num_workers=workers, batch_size=...)."""
    from torch.utils.data import DataLoader

    from streaming import StreamingDataset

    expected = inputs.expected_keys(context.inputs, schema, n)
    start = time.perf_counter()
    ds = StreamingDataset(
        local=os.path.join(context.scratch, dataset), remote=None, shuffle=False, batch_size=batch_size
    )
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers)
    constructed = time.perf_counter()
    batches = iter(loader)
    keys = _batch_keys(schema, next(batches))
    first = time.perf_counter()
    for batch in batches:
        keys.extend(_batch_keys(schema, batch))
    seconds = time.perf_counter() - constructed
    return {
        "time_to_first_batch_s": first - start,
        "seconds": seconds,
        "samples_per_s": len(keys) / seconds,
        "values_ok": sorted(keys) == sorted(expected),
    }


def _loader(context, dataset: str, workers: int, batch_size: int):
    import streaming

    ds = streaming.StreamingDataset(
        local=os.path.join(context.scratch, dataset), remote=None, shuffle=True, batch_size=batch_size
    )
    return streaming.StreamingDataLoader(ds, batch_size=batch_size, num_workers=workers)


def _state_file(context, workers: int) -> str:
    return os.path.join(context.scratch, f"resume-{context.side}-w{workers}.json")


def resume_record(context, dataset: str, workers: int = 2, batch_size: int = 32) -> dict:
    """Setup for `resume`: the uninterrupted id order, then a state_dict after half an epoch."""
    loader = _loader(context, dataset, workers, batch_size)
    reference = [int(i) for batch in loader for i in batch["id"]]
    del loader
    gc.collect()
    loader = _loader(context, dataset, workers, batch_size)
    seen = 0
    for batch in loader:
        seen += len(batch["id"])
        if seen >= len(reference) // 2:
            break
    state = loader.state_dict()
    with open(_state_file(context, workers), "w") as f:
        json.dump({"reference": reference, "seen": seen, "state": state}, f)
    return {"samples": len(reference), "seen": seen}


def resume(context, dataset: str, workers: int = 2, batch_size: int = 32) -> dict:
    """New process: new loader + load_state_dict; time to the first batch; is the rest exact?"""
    # Resolve the classes before the clock starts (a lazy package imports them on first use).
    from streaming import StreamingDataLoader, StreamingDataset  # noqa: F401

    with open(_state_file(context, workers)) as f:
        saved = json.load(f)
    start = time.perf_counter()
    loader = _loader(context, dataset, workers, batch_size)
    loader.load_state_dict(saved["state"])
    batches = iter(loader)
    rest = [int(i) for i in next(batches)["id"]]
    first = time.perf_counter()
    for batch in batches:
        rest.extend(int(i) for i in batch["id"])
    return {"time_to_first_batch_s": first - start, "values_ok": rest == saved["reference"][saved["seen"] :]}
