"""Peak memory of a Spark Python worker converting wide rows with `dataframe_to_mds` (one partition, one worker).

Starts a classic local Spark (``local[1]``, Spark's default Arrow row bound of 10,000, Python workers reused so
they outlive the job), converts ``--rows`` rows of ``--row-mb`` MiB binaries in one partition without compression,
then reads the peak resident memory (``VmHWM``) of every Python worker Spark forked and prints the largest as JSON.
The package is the one on ``PYTHONPATH`` (the workers inherit it), so the same script measures two versions::

    git archive <commit> streaming | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before python benchmarks/spark_wide_rows.py --rows 24 --row-mb 20
    PYTHONPATH=. python benchmarks/spark_wide_rows.py --rows 24 --row-mb 20

pyspark 4.x cuts Arrow batches at 64 MiB by default (``spark.sql.execution.arrow.maxBytesPerBatch``); Spark 3.5 has
no such bound, which ``--conf spark.sql.execution.arrow.maxBytesPerBatch=2147483646`` stands for here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every process below `pid`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def is_python_worker(pid: int) -> bool:
    """Whether `pid` is Spark's Python worker daemon or one of its forks (not the JVM, whose classpath says pyspark)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"pyspark.daemon" in command or b"pyspark.worker" in command


def peak_bytes(pid: int) -> int:
    """`pid`'s peak resident memory (VmHWM), in bytes (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=24)
    parser.add_argument("--row-mb", type=int, default=20)
    parser.add_argument("--conf", action="append", default=[], help="key=value, a Spark setting of the session")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    import streaming
    from streaming.spark import dataframe_to_mds

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        .config(map={key: value for key, value in (item.split("=", 1) for item in args.conf)})
        .getOrCreate()
    )
    size = args.row_mb * 1024 * 1024
    frame = spark.range(0, args.rows, 1, 1).selectExpr(
        "id", f"CAST(repeat(CAST(id % 10 AS STRING), {size}) AS BINARY) AS blob"
    )
    with tempfile.TemporaryDirectory(prefix="wide-rows-") as folder:
        started = time.perf_counter()
        result = dataframe_to_mds(frame, os.path.join(folder, "out"), compression=None, progress=False)
        seconds = time.perf_counter() - started
        workers = [pid for pid in descendants(os.getpid()) if is_python_worker(pid)]
        peak = max((peak_bytes(pid) for pid in workers), default=0)
    spark.stop()
    print(
        json.dumps(
            {
                "package": os.path.dirname(streaming.__file__),
                "conf": args.conf,
                "rows": args.rows,
                "row_mib": args.row_mb,
                "samples": result.samples,
                "seconds": round(seconds, 1),
                "worker_peak_mib": round(peak / 2**20),
                "python": sys.version.split()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
