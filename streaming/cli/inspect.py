"""`inspect URL`: what a dataset holds: columns and encodings, shards, samples, sizes, and a few samples; for a
dataset an incremental job keeps, the table version it holds, the version its checkpoints name, and its mirror
runs' audit (keys removed or replaced, as digests)."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np

from streaming.cli.console import (
    OK,
    UsageError,
    dataset_folder,
    emit,
    human_bytes,
    table,
    unsafe_columns,
    unsafe_refusal,
)
from streaming.format import commit_log
from streaming.format.dataset_version import dataset_version
from streaming.format.index import RAW_DATA, RAW_META, dumps_index, read_index, shard_files, stored_files
from streaming.format.table import ShardTable
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.scratch import scratch as scratch_folder
from streaming.storage.untrusted_text import shown

EXAMPLES = """\
examples:
  mds-streaming inspect /data/ds
  mds-streaming inspect s3://bucket/ds --samples 5
  mds-streaming inspect gs://bucket/ds --json | jq .samples
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "inspect",
        parents=[common],
        help="show a dataset's columns, shards, sizes and a few decoded samples",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", help="dataset root (the folder holding index.json), any URL")
    parser.add_argument("--samples", type=int, default=3, help="decoded samples to show (default 3; 0 for none)")
    parser.add_argument(
        "--allow-unsafe-types", action="store_true", help="also decode pickled (pkl) columns, which can run code"
    )
    parser.add_argument("--audit", type=int, default=10, help="mirror runs' audit entries to show (default 10)")
    parser.set_defaults(run=run)


def _columns(shard: dict[str, Any]) -> dict[str, str]:
    if "columns" in shard:
        return dict(shard["columns"])
    return dict(zip(shard.get("column_names", []), shard.get("column_encodings", [])))


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    if isinstance(value, np.ndarray):
        text = " ".join(text.split())  # numpy's repr breaks rows over lines: one line, as the other values
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summarize(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """The dataset's figures from its index alone."""
    raw = [sum(info["bytes"] for key, info in shard_files(shard) if key in (RAW_DATA, RAW_META)) for shard in shards]
    stored = [sum(info["bytes"] for info in stored_files(shard)) for shard in shards]
    samples = [int(shard["samples"]) for shard in shards]
    column_sets = {tuple(sorted(_columns(shard).items())) for shard in shards}
    return {
        "shards": len(shards),
        "samples": sum(samples),
        "formats": sorted({shard.get("format") for shard in shards}),
        "compression": sorted({str(shard.get("compression")) for shard in shards}),
        "hashes": sorted({name for shard in shards for name in shard.get("hashes") or []}),
        "columns": dict(column_sets.pop()) if len(column_sets) == 1 else [dict(c) for c in sorted(column_sets)],
        "bytes_raw": sum(raw),
        "bytes_stored": sum(stored),
        "compression_ratio": round(sum(raw) / sum(stored), 3) if sum(stored) else None,
        "shard_bytes": _spread(raw),
        "shard_samples": _spread(samples),
    }


def _spread(values: list[int]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "mean": round(statistics.fmean(values), 1),
    }


def decoded_samples(location: DatasetRoot, shards: list[dict[str, Any]], count: int, unsafe: bool) -> list[Any]:
    """The first `count` samples, decoded from the first shards (downloaded to a scratch folder)."""
    from streaming.format.index import stored_files
    from streaming.format.reader_registry import reader_from_json

    found: list[dict[str, Any]] = []
    with scratch_folder("mds-inspect-") as scratch:
        for shard in shards:
            if len(found) >= count:
                break
            if not shard["samples"]:
                continue
            for info in stored_files(shard):
                # A private copy, even of a local dataset: a regular file (never a link's target, a FIFO or a
                # device), no longer than the index says, and decompressed there rather than in the dataset.
                location.fetch(info["basename"], scratch, info["bytes"])
            refused = unsafe_columns(shard)
            if refused and not unsafe:
                raise UsageError(f"no sample shown: {unsafe_refusal(refused)}, or --samples 0")
            reader = reader_from_json(scratch, None, shard)
            reader.validate(unsafe)
            for index in range(min(shard["samples"], count - len(found))):
                found.append(reader.get_item(index))
    return found


def run(args: argparse.Namespace) -> int:
    location = DatasetRoot(dataset_folder(args.url, "inspect"))
    shards = read_index(location)
    summary = {"root": location.url, **summarize(shards)}
    samples = decoded_samples(location, shards, args.samples, args.allow_unsafe_types) if args.samples else []
    summary["sample_preview"] = [{name: _short(value) for name, value in sample.items()} for sample in samples]
    summary["source_versions"] = commit_log.read_snapshot(location).source_versions
    # What a checkpoint's `dataset_version` names, to compare with one (None: a dataset no incremental job keeps).
    summary["dataset_version"] = dataset_version([ShardTable.from_bytes(dumps_index(shards).encode(), location.url)])
    summary["audit"] = commit_log.recent_audits(location, args.audit) if args.audit > 0 else []
    columns = summary["columns"]
    lines = [
        f"dataset  {shown(location.url)}",
        f"format   {shown(', '.join(map(str, summary['formats'])))}   compression "
        f"{shown(', '.join(summary['compression']))}   hashes {shown(', '.join(summary['hashes']) or '-')}",
        f"shards   {summary['shards']}   samples {summary['samples']}",
        f"bytes    {human_bytes(summary['bytes_raw'])} raw, {human_bytes(summary['bytes_stored'])} stored"
        + (f"   ratio {summary['compression_ratio']}x" if summary["compression_ratio"] else ""),
        "",
    ]
    if isinstance(columns, dict):
        lines += [table(sorted(columns.items()), ["column", "encoding"]), ""]
    else:
        lines += [f"shards disagree on columns: {shown(columns)}", ""]
    if summary["shard_bytes"]:
        rows = [
            [name, *(human_bytes(v) if name == "raw bytes" else v for v in spread.values())]
            for name, spread in (("raw bytes", summary["shard_bytes"]), ("samples", summary["shard_samples"]))
        ]
        lines += ["shard sizes", table(rows, ["per shard", "min", "median", "max", "mean"]), ""]
    for name, version in sorted(summary["source_versions"].items()):
        lines.append(f"source   {shown(name)}   table version {version}")
    if summary["dataset_version"]:
        lines.append(f"version  {summary['dataset_version']}   (what checkpoints name as dataset_version)")
    if summary["audit"]:
        lines += ["", f"audit (newest {len(summary['audit'])} mirror runs; keys as digests)"]
        for entry in summary["audit"]:
            lines.append(
                f"  commit {entry['version']} ({shown(entry['file'])}): table version {entry['table_version']}, "
                f"key {shown(entry['key'])}: {len(entry['removed'])} removed, {len(entry['replaced'])} replaced"
            )
            lines += [f"    removed  {digest}" for digest in entry["removed"][:20]]
            lines += [f"    replaced {digest}" for digest in entry["replaced"][:20]]
    if summary["source_versions"] or summary["audit"] or summary["dataset_version"]:
        lines.append("")
    for number, sample in enumerate(summary["sample_preview"]):
        lines.append(f"sample {number}")
        lines += [f"  {shown(name)}: {shown(value)}" for name, value in sorted(sample.items())]
    emit(args, summary, "\n".join(lines))
    return OK
