"""Where a process's memory goes: RSS, PSS and USS split into shard mappings, shared memory, other files and heap.

Runs under any interpreter whose ``streaming`` is ours or the reference (no psutil needed: it reads the same
``/proc/<pid>/smaps`` fields that ``psutil.Process.memory_full_info()`` sums):

    python benchmarks/memory_split.py DATASET_DIR iter      # the main process iterating one epoch
    python benchmarks/memory_split.py DATASET_DIR loader    # plus each of 2 DataLoader workers (batch 32)
    python benchmarks/memory_split.py DATASET_DIR sdl       # the same through streaming.StreamingDataLoader

Prints one JSON line; every figure is MiB. ``uss`` counts private pages, so a shard page mapped by one process
only is counted there even though it is clean page cache.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

FIELDS = ("Rss", "Pss", "Private")


def _kind(path: str) -> str:
    if path.endswith(".mds"):
        return "shard"
    if path.startswith("/dev/shm"):
        return "shm"
    return "file" if path.startswith("/") else "anon"


def smaps_split(pid: int) -> dict[str, dict[str, float]]:
    """MiB of ``Rss``, ``Pss`` and ``Private`` (clean + dirty) per kind of mapping of process ``pid``."""
    kib: dict[str, dict[str, int]] = {}
    kind = "anon"
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                kind = _kind(fields[5] if len(fields) > 5 else "")
                continue
            name = "Private" if fields[0].startswith("Private_") else fields[0][:-1]
            if name in FIELDS:
                totals = kib.setdefault(kind, dict.fromkeys(FIELDS, 0))
                totals[name] += int(fields[1])
    return {kind: {name: round(value / 1024, 1) for name, value in totals.items()} for kind, totals in kib.items()}


def memory(pid: int) -> dict[str, Any]:
    split = smaps_split(pid)
    total = {name: round(sum(part[name] for part in split.values()), 1) for name in FIELDS}
    result: dict[str, Any] = {"rss": total["Rss"], "pss": total["Pss"], "uss": total["Private"], "split": split}
    if pid == os.getpid():
        result["peak_rss"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def main(root: str, mode: str) -> None:
    import torch  # noqa: F401  (imported first on both sides: every process's common baseline)

    from streaming import StreamingDataset

    baseline = memory(os.getpid())
    dataset = StreamingDataset(local=root, batch_size=32)
    if mode == "iter":
        count = sum(1 for _ in dataset)
        print(json.dumps({"mode": mode, "samples": count, "after_torch": baseline, "main": memory(os.getpid())}))
        return
    if mode == "sdl":
        from streaming import StreamingDataLoader as DataLoader
    else:
        from torch.utils.data import DataLoader

    loader = DataLoader(dataset, batch_size=32, num_workers=2, persistent_workers=True)
    count = sum(len(next(iter(batch.values()))) for batch in loader)
    # Alive (persistent_workers); our StreamingDataLoader's workers are those of its inner loader.
    inner = getattr(loader, "_worker_batches", None)
    workers = [memory(worker.pid) for worker in (loader if inner is None else inner)._iterator._workers]
    result = {"mode": mode, "samples": count, "after_torch": baseline, "main": memory(os.getpid()), "workers": workers}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
