"""Memory per process after one DataLoader epoch: USS, PSS and RSS of the main process and of each worker.

* `memory` (both sides): `import torch`, then the package's `StreamingDataLoader` (2 persistent workers, batch 32)
  over `StreamingDataset(local=<the token dataset>)`, one epoch; then `/proc/<pid>/smaps` of the main process and of
  each worker, split by `memory_split.py`.
* `limit_memory` (the physical bar): the same epoch with no dataset library: torch's own `DataLoader`, 2 persistent
  workers, over an `IterableDataset` that yields each sample as a numpy view of the same mapped shards.

USS is what a process holds alone (what 8 ranks x 8 workers multiply); PSS shares every page among the processes
that map it. Every batch is read whole in the main process, as a training step reads it: a batch in shared memory
is then counted shared between the worker that wrote it and the main process. A shard page only one process
mapped counts in its USS although it is clean page cache, dropped first under pressure, so the anonymous part of
USS (heap, numpy and torch allocations) is reported apart.
"""

from __future__ import annotations

import os
from typing import Any

import memory_split
import phase_limits

WORKERS = 2
BATCH_SIZE = 32


def memory(context, n: int, dataset: str) -> dict:
    """One epoch through the package's StreamingDataLoader; the memory of each process afterwards."""
    import torch  # noqa: F401  (first, as a training script imports it)

    from streaming import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(local=os.path.join(context.scratch, dataset), remote=None, shuffle=False, batch_size=32)
    loader = StreamingDataLoader(ds, batch_size=BATCH_SIZE, num_workers=WORKERS, persistent_workers=True)
    count = _consume(loader)
    # Ours hands batches over from an inner torch DataLoader; the reference's is a torch DataLoader itself.
    inner = getattr(loader, "_worker_batches", loader)
    return _figures(inner._iterator._workers, count == n)


def limit_memory(context, n: int, dataset: str) -> dict:
    """The same epoch with torch's DataLoader over numpy views of the mapped shards, no dataset library."""
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    paths = phase_limits._shard_paths(context, dataset)

    class MappedShards(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
            for mapped in phase_limits._mapped(paths[worker::workers]):
                offsets = phase_limits._offsets(mapped)
                for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
                    yield phase_limits._sample_at("tokens", mapped, start, end)

    loader = DataLoader(MappedShards(), batch_size=BATCH_SIZE, num_workers=WORKERS, persistent_workers=True)
    count = _consume(loader)
    return _figures(loader._iterator._workers, count == n)


def _consume(loader) -> int:
    """Read every batch whole, as a training step does (a page never read is never mapped), and count samples."""
    count = 0
    for batch in loader:
        tokens = batch["tokens"]
        tokens.sum()
        count += len(tokens)
    return count


def _figures(workers: list[Any], values_ok: bool) -> dict:
    main = memory_split.memory(os.getpid())
    each = [memory_split.memory(worker.pid) for worker in workers]

    def anon_uss(figures: dict) -> float:
        return figures["split"].get("anon", {}).get("Private", 0.0)

    def largest(key: str) -> float:
        return max(figures[key] for figures in each)

    return {
        "main_uss_mb": main["uss"],
        "main_pss_mb": main["pss"],
        "main_rss_mb": main["rss"],
        "main_heap_uss_mb": anon_uss(main),
        "worker_uss_mb": largest("uss"),
        "worker_pss_mb": largest("pss"),
        "worker_rss_mb": largest("rss"),
        "worker_heap_uss_mb": max(anon_uss(figures) for figures in each),
        "values_ok": values_ok,
        "split": {"main": main["split"], "workers": [figures["split"] for figures in each]},
    }
