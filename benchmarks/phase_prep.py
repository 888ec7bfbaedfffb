"""Untimed preparation phases: cached inputs and the datasets that read scenarios share.

The driver runs these once per run with the reference interpreter, so both sides read the very same
bytes, written by MosaicML Streaming's own MDSWriter.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import inputs


def dir_stats(path: str) -> dict:
    """Total bytes and shard-file count below a dataset directory."""
    total, shards = 0, 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
            shards += ".mds" in name
    return {"out_mb": total / 1e6, "shard_files": shards}


def make_inputs(context, schema: str, n: int) -> dict:
    """Generate (or find cached) the synthetic samples of a schema."""
    start = time.perf_counter()
    path = inputs.ensure(context.inputs, schema, n)
    return {"path": path, "seconds": time.perf_counter() - start}


def write_dataset(
    context, schema: str, n: int, out: str, compression: str | None = None, size_limit: int | None = None
) -> dict:
    """Write n samples of a schema to context.scratch/out with this interpreter's MDSWriter."""
    from streaming import MDSWriter

    rows, _ = inputs.samples(context.inputs, schema, n)
    path = os.path.join(context.scratch, out)
    shutil.rmtree(path, ignore_errors=True)
    options = {"size_limit": size_limit} if size_limit else {}
    start = time.perf_counter()
    with MDSWriter(out=path, columns=inputs.COLUMNS[schema], compression=compression, **options) as writer:
        for row in rows:
            writer.write(row)
    return {"path": path, "seconds": time.perf_counter() - start, **dir_stats(path)}


def many_shards(context, shards: int, out: str) -> dict:
    """A valid dataset of `shards` one-sample shards: one real shard, hard-linked, plus its index.

    The template shard comes from this interpreter's MDSWriter; every other shard is a hard link to
    a copy of it (a fresh copy every 50,000 links, below ext4's per-file link limit), and index.json
    lists each link under its own basename. Builds 100k shards in seconds.
    """
    from streaming import MDSWriter

    path = os.path.join(context.scratch, out)
    template = path + "-template"
    for directory in (path, template):
        shutil.rmtree(directory, ignore_errors=True)
    start = time.perf_counter()
    with MDSWriter(out=template, columns=inputs.COLUMNS["text"]) as writer:
        writer.write({"text": "x" * 100, "id": 7})
    with open(os.path.join(template, "index.json")) as f:
        index = json.load(f)
    entry = index["shards"][0]
    source_shard = os.path.join(template, entry["raw_data"]["basename"])
    os.makedirs(path)
    entries = []
    for k in range(shards):
        if k % 50_000 == 0:
            link_source = os.path.join(template, f"copy-{k}.mds")
            shutil.copyfile(source_shard, link_source)
        basename = f"shard.{k:06d}.mds"
        os.link(link_source, os.path.join(path, basename))
        entries.append({**entry, "raw_data": {**entry["raw_data"], "basename": basename}})
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({**index, "shards": entries}, f)
    return {"path": path, "shards": shards, "seconds": time.perf_counter() - start}
