"""What a mirror run (`incremental_to_mds(..., mode="mirror")`) costs next to a full rebuild, on a many-shard dataset.

Builds a delta-rs table (Change Data Feed on) of ``--shards`` x ``--rows-per-shard`` rows, mirrors it once into
shards of about ``--rows-per-shard`` rows, then deletes 1 row, 100 scattered rows, 1 % of the rows in one id range
(a contiguous slice, as a user's or a source's rows often are) and 1 % scattered over the whole table, running
the mirror after each. For every run: shards rewritten, shard bytes read and written, key-map bytes written, wall
time; and for comparison a full rebuild of the final version (a new mirror of it).

    python benchmarks/mirror_cost.py [--shards 10000] [--rows-per-shard 100] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time

import pyarrow as pa

TEXT_WIDTH = 24


def build(table: str, rows: int, files: int) -> None:
    from deltalake import write_deltalake

    per_file = -(-rows // files)
    for start in range(0, rows, per_file):
        ids = pa.array(range(start, min(rows, start + per_file)), pa.int64())
        batch = pa.table({"id": ids, "text": pa.array([f"event {i:0{TEXT_WIDTH - 6}d}" for i in ids.to_pylist()])})
        write_deltalake(
            table,
            batch,
            mode="append" if start else "error",
            configuration=None if start else {"delta.enableChangeDataFeed": "true"},
        )


def folder_bytes(root: str, folder: str) -> int:
    path = os.path.join(root, folder)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def main() -> None:
    from deltalake import DeltaTable

    from streaming.format import commit_log
    from streaming.spark import incremental_to_mds
    from streaming.storage.dataset_root import DatasetRoot

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=10_000)
    parser.add_argument("--rows-per-shard", type=int, default=100)
    parser.add_argument("--files", type=int, default=20, help="data files of the Delta table")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rows = args.shards * args.rows_per_shard
    work = args.out or tempfile.mkdtemp(prefix="mirror-cost-")
    table, out = os.path.join(work, "table"), os.path.join(work, "mirror")
    # One sample: id (8 bytes), text (4 + 24), two NULL masks (2), its offset (4).
    size_limit = args.rows_per_shard * (8 + 4 + TEXT_WIDTH + 2 + 4) + 8
    options = {"mode": "mirror", "key": ["id"], "size_limit": size_limit, "progress": False}
    report: dict = {"rows": rows, "rows_per_shard": args.rows_per_shard}
    try:
        started = time.perf_counter()
        build(table, rows, args.files)
        report["build_table_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        first = incremental_to_mds(table, out, **options)
        report["first_run"] = {"shards": first.shards, "s": round(time.perf_counter() - started, 1)}
        report["dataset_bytes"] = folder_bytes(out, "increments")
        report["key_map_bytes"] = folder_bytes(out, "_mds_keys")
        print(json.dumps(report), flush=True)
        picker = random.Random(26)
        one_percent = rows // 100
        low = picker.randrange(rows - one_percent)
        cases = [
            ("delete 1 row", [picker.randrange(rows)]),
            ("delete 100 scattered rows", picker.sample(range(rows), 100)),
            ("delete 1 % of rows (one id range)", list(range(low, low + one_percent))),
            ("delete 1 % of rows (scattered)", picker.sample(range(rows), one_percent)),
        ]
        report["runs"] = []
        for name, ids in cases:
            if len(ids) > 1000 and ids == list(range(ids[0], ids[-1] + 1)):
                DeltaTable(table).delete(f"id >= {ids[0]} AND id <= {ids[-1]}")
            else:
                for start in range(0, len(ids), 1000):  # delta-rs's SQL parser takes an IN list of bounded size
                    DeltaTable(table).delete(f"id IN ({', '.join(map(str, ids[start : start + 1000]))})")
            keys_before = folder_bytes(out, "_mds_keys")
            started = time.perf_counter()
            result = incremental_to_mds(table, out, **options)
            seconds = round(time.perf_counter() - started, 2)
            state = commit_log.read_snapshot(DatasetRoot(out))
            run = {
                "case": name,
                "removed": result.removed,
                "shards_rewritten": result.shards_rewritten,
                "shards": len(state.shards),
                "shard_bytes_read": result.bytes_read,
                "shard_bytes_written": result.bytes_written,
                "key_map_bytes_written": folder_bytes(out, "_mds_keys") - keys_before,
                "s": seconds,
                "method": result.method,
            }
            report["runs"].append(run)
            print(json.dumps(run), flush=True)
        rebuild = os.path.join(work, "rebuild")
        started = time.perf_counter()
        again = incremental_to_mds(table, rebuild, **options)
        report["full_rebuild"] = {
            "shards": again.shards,
            "shard_bytes_written": folder_bytes(rebuild, "increments"),
            "table_bytes_read": sum(os.path.getsize(path) for path in DeltaTable(table).file_uris()),
            "s": round(time.perf_counter() - started, 1),
        }
        print(json.dumps(report["full_rebuild"]), flush=True)
    finally:
        if args.out is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
