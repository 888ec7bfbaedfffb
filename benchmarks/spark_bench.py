"""Benchmark `dataframe_to_mds` on Spark: 1M rows on local[2] into a local directory, rows/s.

Rows: ``id`` long, a 200-character string, an array<float> of 64 and an int. They are generated once and
saved as Parquet, one file (and so one partition) per core, which is not timed. Each implementation then
runs in its own process with its own local Spark (start-up not timed): one warm-up conversion, then
``--repeat`` timed conversions of ``spark.read.parquet(...)`` with the default settings (zstd, 64 MB
shards; ``--compression`` changes it for both); the best rate counts. Implementations:

* ``ours``: ``streaming.spark.dataframe_to_mds`` (this package);
* ``upstream``: MosaicML Streaming's ``streaming.base.converters.dataframe_to_mds``, run with the Python of
  another environment where it is installed (``--reference-python``), side by side on the same input;
* ``floor``: a ``mapInArrow`` job that only receives the rows: what any Spark-to-Python converter pays.

Without ``--reference-python`` the ratio is taken against the published reference, 89.6k rows/s.

Usage: ``python benchmarks/spark_bench.py [--rows 1000000] [--repeat 3] [--compression zstd|none]
[--reference-python PATH]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REFERENCE_ROWS_PER_S = 89_600
COLUMNS = {"id": "int64", "text": "str", "embedding": "ndarray:float32", "label": "int32"}


def build_session(cores: int):
    """A classic local session on loopback with the UI off and one partition per input file."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("mds-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.files.maxPartitionBytes", str(1 << 30))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_input(spark, rows: int, cores: int, path: str) -> None:
    """Generate the benchmark rows deterministically and save them as Parquet."""
    frame = spark.range(0, rows, 1, cores).selectExpr(
        "id",
        "substring(repeat(sha2(CAST(id AS STRING), 256), 4), 1, 200) AS text",
        "transform(sequence(0, 63), i -> CAST(((id * 2654435761 + i * 40503) % 1000003) / 1000003.0 AS FLOAT))"
        " AS embedding",
        "CAST(id % 1000 AS INT) AS label",
    )
    frame.write.mode("overwrite").parquet(path)


def count_rows(batches):
    """A ``mapInArrow`` function that only receives the rows."""
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"rows": [sum(batch.num_rows for batch in batches)]})


def convert_once(impl: str, frame, out: str, compression: str | None) -> None:
    if impl == "ours":
        from streaming.spark import dataframe_to_mds

        dataframe_to_mds(frame, out, compression=compression, progress=False)
    elif impl == "upstream":
        from streaming.base.converters import dataframe_to_mds

        kwargs = {"out": out, "columns": COLUMNS, "compression": compression}
        dataframe_to_mds(frame, merge_index=True, mds_kwargs=kwargs)
    else:
        frame.mapInArrow(count_rows, "rows LONG").collect()


def child(impl: str, source: str, rows: int, cores: int, repeat: int, scratch: str, compression: str | None) -> None:
    """Time one implementation in this process and print its rates as JSON on the last line."""
    spark = build_session(cores)
    frame = spark.read.parquet(source)
    rates = []
    for attempt in range(repeat + 1):
        out = os.path.join(scratch, f"{impl}-{attempt}")
        start = time.perf_counter()
        convert_once(impl, frame, out, compression)
        elapsed = time.perf_counter() - start
        shutil.rmtree(out, ignore_errors=True)
        if attempt:  # the first run warms up the Python workers
            rates.append(rows / elapsed)
    spark.stop()
    print(json.dumps({"impl": impl, "rates": rates}))


def run_child(python: str, impl: str, source: str, args: argparse.Namespace, scratch: str) -> list[float]:
    command = [
        python,
        os.path.abspath(__file__),
        "--child",
        impl,
        "--source",
        source,
        "--rows",
        str(args.rows),
        "--cores",
        str(args.cores),
        "--repeat",
        str(args.repeat),
        "--scratch",
        scratch,
        "--compression",
        args.compression,
    ]
    env = {**os.environ, "PYSPARK_PYTHON": python}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=scratch)
    if done.returncode:
        raise RuntimeError(f"{impl} benchmark failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["rates"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compression", default="zstd", help="shard compression for both, or 'none'")
    parser.add_argument("--reference-python", help="a Python with MosaicML Streaming and pyspark installed")
    parser.add_argument("--child", choices=["ours", "upstream", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        compression = None if args.compression == "none" else args.compression
        child(args.child, args.source, args.rows, args.cores, args.repeat, args.scratch, compression)
        return

    scratch = tempfile.mkdtemp(prefix="mds-spark-bench-")
    try:
        source = os.path.join(scratch, "input.parquet")
        spark = build_session(args.cores)
        write_input(spark, args.rows, args.cores, source)
        spark.stop()
        plan = [("floor", sys.executable), ("ours", sys.executable)]
        if args.reference_python:
            plan.append(("upstream", args.reference_python))
        best = {}
        for impl, python in plan:
            rates = run_child(python, impl, source, args, scratch)
            best[impl] = max(rates)
            print(f"{impl:>8}: " + ", ".join(f"{rate / 1000:.1f}k" for rate in rates) + " rows/s")
        reference, label = best.get("upstream", REFERENCE_ROWS_PER_S), "measured side by side"
        if "upstream" not in best:
            label = "published reference"
        print(
            f"ours {best['ours'] / 1000:.1f}k rows/s vs MosaicML Streaming {reference / 1000:.1f}k rows/s "
            f"({label}): {best['ours'] / reference:.2f}x; Spark-to-Python floor {best['floor'] / 1000:.1f}k rows/s"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
