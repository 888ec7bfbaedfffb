"""Training straight from a Delta table, side by side on the same rows: this package's Delta stream, the MDS
conversion of the table read by this package, LitData streaming the table's Parquet files, petastorm's
``make_batch_reader`` over them.

    python benchmarks/delta_stream.py [--rows 200000] [--files 8] [--rounds 2]
        [--litdata-python .bench/litdata/bin/python] [--petastorm-python .bench/petastorm/bin/python]

A table of ``--rows`` rows (an id, 64 int32 tokens, a label and a ~60-byte text) is written by delta-rs in
``--files`` appends (a file and a row group each), then a DELETE of 1 row in 50 of the first append. The sides,
each in a child process of its own, alternate round after round (the machine is shared: only figures of one run
compare):

* ``delta``: ``StreamingDataset(remote=<table folder>, shuffle=True)``: the table's files are the shards;
* ``mds``: the same over the table converted by ``convert_files`` (zstd shards of 64 MB);
* ``litdata``: ``litdata.StreamingDataset`` over the table's Parquet files (indexed by
  ``litdata.index_parquet_dataset``), ``shuffle=True``, with its ``ParquetLoader``;
* ``petastorm``: ``make_batch_reader`` over them (``shuffle_row_groups=True``, one worker thread).

Both read copies of the table's files with the same rows and row groups, rewritten by pyarrow with one string type
and no stored Arrow schema: delta-rs's appends write ``string_view`` and its DELETE ``string`` (LitData's index
refuses files whose types differ), and petastorm needs pyarrow < 16, which cannot parse the schema delta-rs stores.

Per side, each in one process without DataLoader workers: ``first`` is the seconds from constructing the dataset
to its first sample (a cold cache: the first file or shard fetched into it; modules imported before, the Delta
stream's import reported apart); ``shuffled`` the samples/s of a
shuffled epoch read sample by sample; ``batches`` the samples/s of the batch path, 256 samples a batch (ours:
``iter_batches``; LitData: its ``StreamingDataLoader`` with ``num_workers=0``; petastorm: its row-group batches).
Throughputs are taken on a second epoch, so their caches are warm; ``cold`` is the first epoch's batch path, from
constructing the dataset (files fetched, row groups decoded). Sides whose interpreter is missing are skipped
and said so. The delta and litdata/petastorm sides read the table's files after its DELETE differently: LitData and
petastorm do not know Delta's log, so they read every row the files hold; the counts are printed. Prints a table
and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BATCH = 256
TOKENS = 64


# ---------------------------------------------------------------------------------------------- child side


def _timed_epochs(make: Any, iterate: Any) -> dict[str, Any]:
    start = time.perf_counter()
    dataset = make()
    items = iterate(dataset)
    next(items)
    first = time.perf_counter() - start
    count = 1 + sum(1 for _ in items)
    cold = time.perf_counter() - start
    begin = time.perf_counter()
    again = sum(1 for _ in iterate(dataset))
    seconds = time.perf_counter() - begin
    return {"first": first, "samples": count, "cold_per_s": count / cold, "per_s": again / seconds if seconds else 0.0}


def _batch_rows(batches: Any) -> Any:
    """One item per sample of each batch (only counted)."""
    for batch in batches:
        yield from range(len(batch))


def child(side: str, mode: str, data: str, cache: str) -> dict[str, Any]:
    if side in ("delta", "mds"):
        from streaming import StreamingDataset

        imported = 0.0
        if side == "delta":
            # pyarrow, deltalake and the conversion's encoder (which has pyarrow import pandas): once per process,
            # reported apart, as the other sides' imports are not timed either.
            begin = time.perf_counter()
            import streaming.dataset.delta_stream  # noqa: F401

            imported = time.perf_counter() - begin

        def make() -> Any:
            return StreamingDataset(remote=data, local=cache, shuffle=True, batch_size=BATCH)

        if mode == "shuffled":
            return {**_timed_epochs(make, iter), "import": imported}
        return {
            **_timed_epochs(make, lambda ds: _batch_rows(b["id"] for b in ds.iter_batches(BATCH))),
            "import": imported,
        }
    if side == "litdata":
        import litdata
        from litdata.streaming.item_loader import ParquetLoader

        def make_lit() -> Any:
            return litdata.StreamingDataset(data, item_loader=ParquetLoader(), shuffle=True, cache_dir=cache)

        if mode == "shuffled":
            return _timed_epochs(make_lit, iter)
        return _timed_epochs(
            make_lit,
            lambda ds: _batch_rows(
                b["id"] if isinstance(b, dict) else b[0]
                for b in litdata.StreamingDataLoader(ds, batch_size=BATCH, num_workers=0)
            ),
        )
    if side == "petastorm":
        from petastorm import make_batch_reader

        def batches(_: Any) -> Any:
            with make_batch_reader(
                f"file://{data}", shuffle_row_groups=True, num_epochs=1, workers_count=1, reader_pool_type="thread"
            ) as reader:
                for batch in reader:
                    yield from range(len(batch.id))

        return _timed_epochs(lambda: None, batches)
    raise ValueError(side)


# ---------------------------------------------------------------------------------------------- parent side


def build(scratch: str, rows: int, files: int) -> tuple[str, str, str, str, int]:
    """The table, its MDS conversion, two folders of hard links to its Parquet files (LitData's index goes in the
    first: petastorm would take it for a Parquet file); and its live row count."""
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from streaming.convert.arrow_engine import convert_files

    table = os.path.join(scratch, "table")
    per = rows // files
    rng = np.random.default_rng(46)
    for number in range(files):
        ids = np.arange(number * per, (number + 1) * per, dtype=np.int64)
        tokens = rng.integers(0, 50_257, (per, TOKENS), dtype=np.int32)
        batch = pa.table(
            {
                "id": ids,
                "tokens": pa.FixedSizeListArray.from_arrays(pa.array(tokens.reshape(-1)), TOKENS).cast(
                    pa.list_(pa.int32())
                ),
                "label": ids % 1000,
                "text": pa.array([f"sample {i} of the benchmark table, some words to read" for i in ids.tolist()]),
            }
        )
        write_deltalake(table, batch, mode="append")
    # In the first append's rows only: delta-rs rewrites every file a DELETE touches (it writes no deletion
    # vectors), and in one file, so a DELETE everywhere would leave one file of every row.
    DeltaTable(table).delete(f"id < {per} AND id % 50 = 7")
    mds = os.path.join(scratch, "mds")
    convert_files(table, mds, kind="delta")
    import pyarrow.parquet as pq

    folders = [os.path.join(scratch, "parquet-litdata"), os.path.join(scratch, "parquet-petastorm")]
    for folder in folders:
        os.makedirs(folder)
    for uri in DeltaTable(table).file_uris():
        # The same rows and row groups, rewritten by pyarrow: delta-rs stores an Arrow schema in its files' footers
        # that petastorm's pyarrow (< 16: it imports pyarrow.filesystem) cannot parse ("Unrecognized type: 24"),
        # and its appends and its DELETE type strings apart (string_view, string), which LitData's index refuses.
        source = pq.ParquetFile(uri)
        name = os.path.basename(uri)
        schema = pa.schema(
            [pa.field(f.name, pa.string() if str(f.type) == "string_view" else f.type) for f in source.schema_arrow]
        )
        with pq.ParquetWriter(os.path.join(folders[1], name), schema, store_schema=False) as out:
            for group in range(source.num_row_groups):
                out.write_table(source.read_row_group(group).cast(schema))
        os.link(os.path.join(folders[1], name), os.path.join(folders[0], name))
    live = DeltaTable(table).to_pyarrow_table(columns=["id"]).num_rows
    return table, mds, folders[0], folders[1], live


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--litdata-python",
        default=os.environ.get("BENCH_LITDATA_PYTHON", os.path.join(ROOT, ".bench", "litdata", "bin", "python")),
    )
    parser.add_argument(
        "--petastorm-python",
        default=os.environ.get("BENCH_PETASTORM_PYTHON", os.path.join(ROOT, ".bench", "petastorm", "bin", "python")),
    )
    args = parser.parse_args()
    parent = os.environ.get("BENCH_SCRATCH")
    if parent:
        os.makedirs(parent, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="delta-stream-bench-", dir=parent)
    try:
        table, mds, parquet, petastorm_parquet, live = build(scratch, args.rows, args.files)
        sides: list[tuple[str, str, str]] = [("delta", sys.executable, table), ("mds", sys.executable, mds)]
        skipped = []
        for name, python, folder in (
            ("litdata", args.litdata_python, parquet),
            ("petastorm", args.petastorm_python, petastorm_parquet),
        ):
            if os.path.exists(python):
                sides.append((name, python, folder))
            else:
                skipped.append(f"{name} ({python} missing)")
        if any(name == "litdata" for name, _, _ in sides):
            subprocess.run(
                [args.litdata_python, "-c", f"import litdata; litdata.index_parquet_dataset({parquet!r})"],
                check=True,
                capture_output=True,
            )
        figures: dict[str, dict[str, list[float]]] = {}
        counts: dict[str, int] = {}
        env = {**os.environ, "PYTHONPATH": ROOT}
        failed: set[str] = set()
        for round_number in range(args.rounds):
            for name, python, data in sides:
                modes = ("batches",) if name == "petastorm" else ("shuffled", "batches")
                for mode in modes:
                    if name in failed:
                        continue
                    cache = os.path.join(scratch, f"cache-{name}-{mode}-{round_number}")
                    command = [python, os.path.abspath(__file__), "--child", name, mode, data, cache]
                    done = subprocess.run(command, env=env, capture_output=True, text=True)
                    if done.returncode:
                        if name in ("delta", "mds"):
                            raise SystemExit(f"{name} {mode} failed:\n{done.stderr[-3000:]}")
                        # A side that cannot read these files is reported with its error, not measured.
                        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
                        skipped.append(f"{name} (failed: {reason[:300]})")
                        failed.add(name)
                        continue
                    result = json.loads(done.stdout.strip().splitlines()[-1])
                    shutil.rmtree(cache, ignore_errors=True)
                    entry = figures.setdefault(name, {})
                    entry.setdefault(f"{mode}_per_s", []).append(result["per_s"])
                    entry.setdefault(f"{mode}_first_s", []).append(result["first"])
                    entry.setdefault(f"{mode}_cold_per_s", []).append(result["cold_per_s"])
                    if "import" in result:
                        entry.setdefault("import_s", []).append(result["import"])
                    counts[name] = result["samples"]
        report = {
            name: {key: statistics.median(values) for key, values in entry.items()} for name, entry in figures.items()
        }
        print(f"{args.rows} rows in {args.files} appends, {live} live after the DELETE; {args.rounds} rounds")
        print(f"{'side':10} {'samples':>8} {'first (s)':>10} {'shuffled/s':>11} {'batches/s':>11} {'cold/s':>11}")
        for name, entry in report.items():
            if "batches_per_s" not in entry:
                continue
            first = entry.get("shuffled_first_s", entry.get("batches_first_s", 0.0))
            shuffled = entry.get("shuffled_per_s")
            print(
                f"{name:10} {counts[name]:>8} {first:>10.3f} "
                f"{'-' if shuffled is None else f'{shuffled:,.0f}':>11} {entry['batches_per_s']:>11,.0f} "
                f"{entry['batches_cold_per_s']:>11,.0f}"
            )
        if "delta" in report:
            print(f"delta: importing the Delta stream took {report['delta']['import_s']:.3f} s once, not counted above")
        if "delta" in report and "mds" in report:
            delta, copy = report["delta"], report["mds"]
            ratios = {key: delta[key] / copy[key] for key in delta if key in copy and copy[key]}
            print(
                f"delta/mds: shuffled {ratios['shuffled_per_s']:.2f}x, batches {ratios['batches_per_s']:.2f}x "
                f"(cold {ratios['batches_cold_per_s']:.2f}x), first sample {ratios['shuffled_first_s']:.2f}x"
            )
        for line in skipped:
            print(f"skipped: {line}")
        print(json.dumps({"rows": args.rows, "live": live, "counts": counts, "sides": report, "skipped": skipped}))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        print(json.dumps(child(*sys.argv[2:6])), flush=True)
        # Without the interpreter's teardown: petastorm's reader threads on pyarrow 14 may abort it ("terminate
        # called without an active exception") once the figures are out.
        os._exit(0)
    else:
        main()
