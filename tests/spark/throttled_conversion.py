"""A conversion of 64 MiB shards from 8 concurrent tasks, run in its own Spark application (``local[8,1]``: eight task
slots, and a task that fails once fails the job). Run by ``test_databricks_throttling.py``.

    python throttled_conversion.py OUT PARTITIONS ROWS_PER_PARTITION

Each row is ``id`` and 2 MiB of bytes derived from the id (``payload``), so the test can check every sample
without holding them. Prints the conversion's result as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

SAMPLE_BYTES = 2 << 20


def payload(sample_id: int) -> bytes:
    return np.random.default_rng(sample_id).bytes(SAMPLE_BYTES)


def samples(batch: Any) -> Iterator[dict[str, Any]]:
    for sample_id in batch["id"]:
        yield {"id": int(sample_id), "data": payload(int(sample_id))}


def main(out: str, partitions: int, rows: int) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from streaming.spark import dataframe_to_mds

    spark = (
        SparkSession.builder.master("local[8,1]")
        .appName("throttled-conversion")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        frame = spark.range(0, partitions * rows, 1, partitions)
        result = dataframe_to_mds(
            frame,
            out,
            columns={"id": "int64", "data": "bytes"},
            udf=samples,
            compression=None,
            size_limit="64mb",
            progress=False,
        )
    finally:
        spark.stop()
    print(json.dumps({"samples": result.samples, "shards": result.shards, "bytes": result.bytes}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
