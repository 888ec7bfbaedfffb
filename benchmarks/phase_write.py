"""MDSWriter throughput: write n cached samples of one schema into a fresh directory.

Timed: from MDSWriter construction to the end of its `with` block (last shard and index.json
written). Not timed: importing `streaming`, loading the inputs, flushing dirty pages beforehand.
"""

from __future__ import annotations

import os
import shutil
import time

import inputs
from phase_prep import dir_stats


def write(context, schema: str, n: int, compression: str | None) -> dict:
    """Samples/s and payload MB/s of one MDSWriter run, plus output size and shard count."""
    from streaming import MDSWriter

    rows, payload = inputs.samples(context.inputs, schema, n)
    out = os.path.join(context.scratch, f"write-{context.side}-{schema}-{compression or 'none'}")
    shutil.rmtree(out, ignore_errors=True)
    os.sync()  # earlier phases' dirty pages must not be written back during the timed part
    start = time.perf_counter()
    with MDSWriter(out=out, columns=inputs.COLUMNS[schema], compression=compression) as writer:
        for row in rows:
            writer.write(row)
    seconds = time.perf_counter() - start
    stats = dir_stats(out)
    shutil.rmtree(out, ignore_errors=True)
    return {"seconds": seconds, "samples_per_s": n / seconds,
            "payload_mb_per_s": payload / 1e6 / seconds, **stats}
