"""What one `incremental_to_mds` run costs after a one-row change to a 10M-row Delta table.

Builds a delta-rs table of ``--rows`` rows in ``--files`` data files (Change Data Feed on), converts it once, updates
one row (delta-rs rewrites the one file holding it), then times the next run both ways it can read the change: the
Change Data Feed and the changed files (``change_data_feed=False``); and, for comparison, reading the two versions
whole, which is what the diff read before issue 23 (a lower bound of that diff: it then also joined them in Spark).

    python benchmarks/incremental_cost.py [--rows 10000000] [--files 100] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import pyarrow as pa


def build(table: str, rows: int, files: int, configuration: dict[str, str] | None = None) -> None:
    """A delta-rs table of ``rows`` rows in ``files`` appends; its first commit sets ``configuration`` (default: the
    Change Data Feed on)."""
    from deltalake import write_deltalake

    per_file = rows // files
    for number in range(files):
        start = number * per_file
        ids = pa.array(range(start, start + per_file), pa.int64())
        batch = pa.table(
            {
                "id": ids,
                "text": pa.array([f"event {i:010d}" for i in range(start, start + per_file)]),
                "value": pa.compute.multiply(ids.cast(pa.float64()), 0.5),
            }
        )
        write_deltalake(
            table,
            batch,
            mode="append" if number else "error",
            configuration=None if number else (configuration or {"delta.enableChangeDataFeed": "true"}),
        )


def timed(function):
    started = time.perf_counter()
    value = function()
    return value, round(time.perf_counter() - started, 2)


def main() -> None:
    from deltalake import DeltaTable

    from streaming.spark import incremental_to_mds

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = args.out or tempfile.mkdtemp(prefix="mds-incremental-cost-")
    table, feed_out, files_out = (os.path.join(work, name) for name in ("table", "feed", "files"))
    _, build_seconds = timed(lambda: build(table, args.rows, args.files))
    first, first_seconds = timed(lambda: incremental_to_mds(table, feed_out, progress=False))
    shutil.copytree(feed_out, files_out)
    held = DeltaTable(table).version()
    DeltaTable(table).update(new_values={"text": "changed"}, predicate=f"id = {args.rows // 2}")
    feed, feed_seconds = timed(lambda: incremental_to_mds(table, feed_out, progress=False))
    by_files, files_seconds = timed(
        lambda: incremental_to_mds(table, files_out, change_data_feed=False, progress=False)
    )
    whole, whole_seconds = timed(
        lambda: (DeltaTable(table, version=held).to_pyarrow_table(), DeltaTable(table).to_pyarrow_table())
    )
    table_bytes = sum(entry.stat().st_size for entry in os.scandir(table) if entry.name.endswith(".parquet"))
    result = {
        "rows": args.rows,
        "data_files": args.files,
        "table_parquet_bytes": table_bytes,
        "build_seconds": build_seconds,
        "first_run": {"method": first.method, "samples": first.samples, "seconds": first_seconds},
        "one_row_update": {
            "change_data_feed": {"samples": feed.samples, "removed": feed.unapplied_changes, "seconds": feed_seconds},
            "changed_files": {
                "method": by_files.method,
                "samples": by_files.samples,
                "removed": by_files.unapplied_changes,
                "rows_read": 2 * (args.rows // args.files),
                "seconds": files_seconds,
            },
            "both_versions_whole_read_only": {"rows_read": sum(t.num_rows for t in whole), "seconds": whole_seconds},
        },
    }
    print(json.dumps(result, indent=2))
    if args.out is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
