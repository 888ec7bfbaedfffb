"""Spark DataFrame -> MDS through `streaming.base.converters.dataframe_to_mds` on local[2].

The DataFrame is built from Spark SQL expressions (no Python UDF) and cached and counted before the
clock starts: id long | text string (200 chars) | emb array<float>[64] | label int. Needs pyspark
and Java on the side's interpreter; the driver runs it only when asked or when ours has the API.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

COLUMNS = {"id": "int64", "text": "str", "emb": "ndarray:float32", "label": "int32"}


def _session(scratch: str):
    from pyspark.sql import SparkSession

    spark_tmp = os.path.join(scratch, "spark-tmp")
    os.makedirs(spark_tmp, exist_ok=True)
    os.environ.update(
        {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    )
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("mds-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "4g")
        .config("spark.local.dir", spark_tmp)
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={spark_tmp}")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _samples_in_index(path: str) -> int:
    with open(os.path.join(path, "index.json")) as f:
        return sum(shard["samples"] for shard in json.load(f)["shards"])


def spark_convert(context, n: int) -> dict:
    """Rows/s of dataframe_to_mds(df, merge_index=True) and whether the index counts n rows."""
    try:
        from pyspark.sql import functions as F
    except ImportError as exc:
        hint = "for the reference, run benchmarks/setup_ref.sh without BENCH_REF_SPARK=0"
        raise ImportError(f"{exc}: install pyspark into {sys.executable}'s venv ({hint})") from exc
    from streaming.base.converters import dataframe_to_mds

    start = time.perf_counter()
    spark = _session(context.scratch)
    session_s = time.perf_counter() - start
    try:
        df = (
            spark.range(0, n, numPartitions=2)
            .select(
                F.col("id"),
                F.expr("substring(repeat(concat(sha2(cast(id as string), 256), ' '), 4), 1, 200)").alias("text"),
                F.expr("transform(sequence(0, 63), i -> cast(sin(id * 0.001 + i) as float))").alias("emb"),
                F.expr("cast(id % 1000 as int)").alias("label"),
            )
            .cache()
        )
        df.count()
        out = os.path.join(context.scratch, f"spark-{context.side}-{n}")
        shutil.rmtree(out, ignore_errors=True)
        convert_start = time.perf_counter()
        dataframe_to_mds(df, merge_index=True, mds_kwargs={"out": out, "columns": COLUMNS})
        convert_s = time.perf_counter() - convert_start
    finally:
        spark.stop()
    rows = _samples_in_index(out)
    shutil.rmtree(out, ignore_errors=True)
    return {"session_s": session_s, "convert_s": convert_s, "rows_per_s": n / convert_s, "values_ok": rows == n}
