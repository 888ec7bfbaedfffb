"""MDSWriter throughput: write n cached samples of one schema into a fresh directory.

Timed: from MDSWriter construction to the end of its `with` block (last shard and index.json
written), best of a few repeats. Not timed: importing `streaming`, loading the inputs, flushing
dirty pages beforehand.
"""

from __future__ import annotations

import os
import shutil
import time

import inputs
from phase_prep import dir_stats


def _write_once(writer_class, out: str, schema: str, rows: list, compression: str | None) -> float:
    shutil.rmtree(out, ignore_errors=True)
    os.sync()  # earlier writes' dirty pages must not be flushed during the timed part
    start = time.perf_counter()
    with writer_class(out=out, columns=inputs.COLUMNS[schema], compression=compression) as writer:
        for row in rows:
            writer.write(row)
    return time.perf_counter() - start


def write(context, schema: str, n: int, compression: str | None, repeats: int = 3) -> dict:
    """Samples/s and payload MB/s of the fastest of `repeats` MDSWriter runs into a fresh
    directory (short phases on a shared machine are noisy), plus output size and shard count."""
    from streaming import MDSWriter

    rows, payload = inputs.samples(context.inputs, schema, n)
    out = os.path.join(context.scratch, f"write-{context.side}-{schema}-{compression or 'none'}")
    times = [_write_once(MDSWriter, out, schema, rows, compression) for _ in range(repeats)]
    stats = dir_stats(out)
    shutil.rmtree(out, ignore_errors=True)
    best = min(times)
    return {"seconds_each": times, "samples_per_s": n / best, "payload_mb_per_s": payload / 1e6 / best, **stats}
