"""`convert SRC OUT`: Parquet, Delta, JSON Lines, CSV or a saved Hugging Face dataset → an MDS dataset.

With Spark (`--spark`, or a session already active in this process, or a Databricks runtime) the input is read
by Spark and written by `streaming.spark.dataframe_to_mds`. Otherwise pyarrow reads it in a process pool:
each task streams its record batches through the same encoder (`streaming.spark.arrow_encoder`), the same type
rules (`streaming.spark.arrow_schema`, the Arrow face of `streaming.spark.schema`) and the same commit protocol
(`streaming.spark.task.write_attempt` into the task's own folder, `streaming.spark.commit.publish` of the
index last, atomically), so the two paths write the same dataset layout.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from streaming.cli.console import OK, UsageError, emit, human_bytes, note, progress

EXAMPLES = """\
examples:
  mds-streaming convert data.parquet /tmp/ds                       # every column, default encodings
  mds-streaming convert s3://bucket/events/ s3://bucket/mds --compression zstd --hashes xxh64
  mds-streaming convert logs.jsonl /tmp/ds --columns text:str,label:int64 --size-limit 32mb
  mds-streaming convert /data/hf_saved /tmp/ds --split train      # a datasets.save_to_disk folder
  mds-streaming convert /delta/table /tmp/ds --mode append         # a Delta path (deltalake, or --spark)
  mds-streaming convert main.sales.orders /Volumes/c/s/v/ds --spark   # a table name needs Spark
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "convert",
        parents=[common],
        help="convert Parquet, Delta, JSON Lines, CSV or a Hugging Face dataset to MDS",
        description=__doc__.split("\n\n")[0],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("src", help="input file or folder (any URL), a Delta path, or a table name (with --spark)")
    parser.add_argument("out", help="dataset root to write (any URL)")
    parser.add_argument(
        "--columns",
        help="columns to write: 'a,b' (default encodings) or 'a:str,b:int64' (chosen encodings); default: all",
    )
    parser.add_argument("--compression", default="zstd", help="shard compression, e.g. zstd, zstd:7, gz, none")
    parser.add_argument("--hashes", default="", help="comma-separated hash algorithms to record, e.g. sha1,xxh64")
    parser.add_argument("--size-limit", default="64mb", help="shard size cap, e.g. 64mb (default) or 67108864")
    parser.add_argument(
        "--mode", choices=("error", "overwrite", "append"), default="error", help="when OUT holds data (default: error)"
    )
    parser.add_argument(
        "--nulls",
        choices=("mask", "error"),
        default="mask",
        help="mask (default): a column holding NULLs gets a NULL-mask column and reads back as None (except "
        "columns given an encoding in --columns); error: a NULL stops the conversion",
    )
    parser.add_argument("--format", dest="kind", choices=("parquet", "jsonl", "csv", "hf", "delta"), help="input kind")
    parser.add_argument("--split", help="the split to convert of a Hugging Face DatasetDict")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: one per CPU)")
    parser.add_argument(
        "--engine",
        choices=("auto", "spark", "pyarrow"),
        default="auto",
        help="spark: dataframe_to_mds; pyarrow: a local process pool; auto (default): Spark when a session is "
        "active in this process or on Databricks, else pyarrow",
    )
    parser.add_argument("--spark", dest="engine", action="store_const", const="spark", help="same as --engine spark")
    parser.set_defaults(run=run)


def parse_columns(text: str | None) -> dict[str, str | None] | None:
    """`'a,b:int64'` → `{'a': None, 'b': 'int64'}` (None: the default encoding)."""
    if not text:
        return None
    columns: dict[str, str | None] = {}
    for item in text.split(","):
        name, _, encoding = item.strip().partition(":")
        if not name:
            raise UsageError(
                f"--columns {text!r}: empty column name; write 'name' or 'name:encoding', comma-separated."
            )
        columns[name] = encoding or None
    return columns


def _use_spark(args: argparse.Namespace) -> bool:
    if args.engine != "auto":
        return args.engine == "spark"
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    import sys

    if "pyspark" not in sys.modules:
        return False
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def run(args: argparse.Namespace) -> int:
    compression = None if args.compression in ("", "none", "None") else args.compression
    hashes = [name for name in args.hashes.split(",") if name]
    columns = parse_columns(args.columns)
    from streaming.format.compression import check_compression
    from streaming.format.hashing import check_hashes
    from streaming.format.writer import parse_size_limit

    try:
        compression = check_compression(compression)
        hashes = check_hashes(hashes)
        size_limit = parse_size_limit(args.size_limit)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}.")
    if _use_spark(args):
        result = _convert_with_spark(args, columns, compression, hashes, size_limit)
    else:
        from streaming.cli.sources import looks_like_table_name

        if looks_like_table_name(args.src):
            raise UsageError(
                f"{args.src!r} is neither a file nor a folder here; if it is a table name, pass --spark "
                f"(reading a catalog table needs Spark)."
            )
        result = convert_with_arrow(
            args.src,
            args.out,
            columns=columns,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            mode=args.mode,
            kind=args.kind,
            split=args.split,
            workers=args.workers,
            nulls=args.nulls,
            args=args,
        )
    text = (
        f"wrote {result['samples']} samples in {result['shards']} shards ({human_bytes(result['bytes'])}) "
        f"to {result['path']}\ncolumns: " + ", ".join(f"{k}={v}" for k, v in result["columns"].items())
    )
    emit(args, result, text)
    return OK


def _convert_with_spark(
    args: argparse.Namespace,
    columns: dict[str, str | None] | None,
    compression: str | None,
    hashes: list[str],
    size_limit: int | None,
) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from streaming.spark import dataframe_to_mds

    session = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    data: Any = args.src
    kind = args.kind or _file_kind(args.src)
    if kind in ("parquet", "jsonl", "csv"):
        reader = session.read
        data = {
            "parquet": lambda: reader.parquet(args.src),
            "jsonl": lambda: reader.json(args.src),
            "csv": lambda: reader.option("header", True).option("inferSchema", True).csv(args.src),
        }[kind]()
    elif kind == "hf":
        raise UsageError("Spark cannot read Hugging Face Arrow files; convert them without --spark.")
    chosen: Any = None
    if columns is not None:
        chosen = list(columns) if all(v is None for v in columns.values()) else columns
        if isinstance(chosen, dict) and any(v is None for v in chosen.values()):
            raise UsageError("With --spark, give every column an encoding ('a:str,b:int64') or none of them.")
    result = dataframe_to_mds(
        data,
        args.out,
        columns=chosen,
        compression=compression,
        hashes=hashes,
        size_limit=size_limit,
        mode=args.mode,
        spark=session,
        progress=not args.quiet,
        nulls=args.nulls,
    )
    return {
        "path": result.path,
        "shards": result.shards,
        "samples": result.samples,
        "bytes": result.bytes,
        "columns": result.columns,
        "nulls": {"masks": result.nulls, "as_json": result.nulls_json, "counted_by": result.nulls_counted_by},
        "mode": result.mode,
        "run": result.run,
        "engine": "spark",
    }


def _file_kind(src: str) -> str | None:
    lowered = src.lower().rstrip("/")
    for suffix, kind in ((".parquet", "parquet"), (".jsonl", "jsonl"), (".json", "jsonl"), (".csv", "csv")):
        if lowered.endswith(suffix):
            return kind
    return None


def new_run_id() -> str:
    """A run folder name as `dataframe_to_mds` makes them: UTC time (runs sort by age) and a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def _convert_task(config: Any, task: Any, partition: int, target: Any) -> dict[str, Any]:
    """Run in a worker process: write one task's batches as attempt 0 of partition `partition`."""
    from streaming.cli.sources import batches
    from streaming.spark.arrow_schema import normalize_batch
    from streaming.spark.task import write_attempt

    values = {name: encoding for name, encoding in config.columns.items() if name not in config.nulls.values()}

    def cast(stream: Any) -> Any:
        for batch in stream:
            normalized = normalize_batch(batch, values)
            if normalized.schema != target:
                try:
                    normalized = normalized.cast(target)
                except Exception as err:
                    raise ValueError(
                        f"{task.url}: its columns have types {normalized.schema} but the first input file's are "
                        f"{target} and cannot hold them ({err}); convert the files separately or fix their types."
                    ) from err
            yield normalized

    return write_attempt(config, cast(batches(task)), partition, 0)


def convert_with_arrow(
    src: str,
    out: str,
    *,
    columns: dict[str, str | None] | None = None,
    compression: str | None = "zstd",
    hashes: list[str] | None = None,
    size_limit: int | None = 1 << 26,
    mode: str = "error",
    kind: str | None = None,
    split: str | None = None,
    workers: int = 1,
    nulls: str = "mask",
    args: argparse.Namespace | None = None,
) -> dict[str, Any]:
    """Convert `src` to MDS at `out` with pyarrow; returns the summary that `convert --json` prints."""
    import pyarrow as pa

    from streaming._version import DISTRIBUTION_VERSION
    from streaming.cli.sources import detect, read_schema
    from streaming.spark import commit
    from streaming.spark.arrow_schema import normalize_batch, resolve_columns
    from streaming.spark.null_plan import check_policy
    from streaming.spark.task import TaskConfig
    from streaming.storage.dataset_root import DatasetRoot
    from streaming.storage.out_argument import normalize_root

    check_policy(nulls)
    source = detect(src, kind, workers, split)
    schema = read_schema(source.tasks[0])
    values = resolve_columns(schema, columns)
    empty = pa.RecordBatch.from_pylist([], schema=schema)
    target = normalize_batch(empty, values).schema
    destination = DatasetRoot(normalize_root(out))
    base = commit.check_destination(destination, mode)
    explicit = [name for name, encoding in (columns or {}).items() if encoding is not None]
    null_plan = plan_arrow_nulls(source, schema, values, explicit, nulls, base.shards if mode == "append" else [])
    plan = null_plan.columns
    commit.check_append_columns(base.shards, plan, destination.url)
    run_id = new_run_id()
    config = TaskConfig(
        destination=destination.url,
        run=run_id,
        columns=plan,
        compression=compression,
        hashes=tuple(hashes or ()),
        size_limit=size_limit,
        direct=destination.is_local,
        nulls=null_plan.masks,
    )
    records: list[dict[str, Any]] = []
    bar = (
        progress(args, total=source.rows or len(source.tasks), unit="rows" if source.rows else "files")
        if args
        else None
    )
    try:
        if workers == 1 or len(source.tasks) == 1:
            for number, task in enumerate(source.tasks):
                records.append(_convert_task(config, task, number, target))
                if bar is not None:
                    bar.update(task.rows or 1)
        else:
            import multiprocessing

            # fork where there is one: workers start at once with the modules already imported (spawn costs
            # seconds per worker); nothing of ours runs threads in the parent before the pool starts.
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            with ProcessPoolExecutor(min(workers, len(source.tasks)), mp_context=context) as pool:
                futures = {
                    pool.submit(_convert_task, config, task, number, target): task
                    for number, task in enumerate(source.tasks)
                }
                for future in as_completed(futures):
                    records.append(future.result())
                    if bar is not None:
                        bar.update(futures[future].rows or 1)
    except BaseException:
        commit.discard_run(destination, run_id)
        raise
    finally:
        if bar is not None:
            bar.close()
    attempts = [
        commit.Attempt(
            partition=record["partition"],
            attempt=record["attempt"],
            directory=record["directory"],
            shards=json.loads(record["shards"]),
            samples=record["samples"],
            bytes=record["bytes"],
            peak_local_bytes=record["peak_local_bytes"],
        )
        for record in records
    ]
    samples = sum(attempt.samples for attempt in attempts)
    size = sum(attempt.bytes for attempt in attempts)
    shards = sum(len(attempt.shards) for attempt in attempts)
    metadata = {
        "run": run_id,
        "mode": mode,
        "source": {"kind": source.kind, "path": source.root, "version": source.version, "reader": "pyarrow"},
        "columns": plan,
        "nulls": null_plan.to_json(),
        "compression": compression,
        "hashes": list(hashes or ()),
        "size_limit": size_limit,
        "shards": shards,
        "samples": samples,
        "bytes": size,
        "writer": f"mds-streaming {DISTRIBUTION_VERSION} (command line)",
    }
    commit.publish(destination, run_id, attempts, mode, metadata=metadata, base=base)
    if args is not None:
        note(args, f"converted {len(source.tasks)} task(s) of {source.kind} input")
    return {
        "path": destination.url,
        "shards": shards,
        "samples": samples,
        "bytes": size,
        "columns": plan,
        "nulls": null_plan.to_json(),
        "mode": mode,
        "run": run_id,
        "engine": "pyarrow",
        "source_kind": source.kind,
    }


def plan_arrow_nulls(
    source: Any, schema: Any, columns: dict[str, str], explicit: list[str], policy: str, joined: list[dict[str, Any]]
) -> Any:
    """The NULL plan (`streaming.spark.null_plan`) of a pyarrow conversion, its NULLs counted from the input."""
    import pyarrow as pa

    from streaming.spark.arrow_schema import spark_equivalent
    from streaming.spark.null_plan import dataset_columns, null_columns
    from streaming.spark.source import Source

    fields = {item.name: item for item in schema}
    return null_columns(
        columns,
        explicit=explicit,
        policy=policy,
        nullable=[name for name in columns if fields[name].nullable],
        null_elements=[
            name
            for name in columns
            if pa.types.is_list(spark_equivalent(fields[name].type)) and fields[name].type.value_field.nullable
        ],
        source=Source(source.kind, source.root, source.version, "deltalake")
        if source.kind == "delta"
        else Source(source.kind),
        count=lambda values, elements: _count_nulls(source, values, elements),
        dataset=dataset_columns(joined),
        caller="convert",
    )


def _count_nulls(source: Any, values: list[str], elements: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """NULLs of ``values`` and rows with NULL elements of ``elements``: Parquet footers first, then one read."""
    import pyarrow.compute as pc

    from streaming.cli.sources import batches

    counts = _parquet_footer_null_counts(source, values)
    unread = [name for name in values if name not in counts]
    counts.update(dict.fromkeys(unread, 0))
    rows_with_null_elements = dict.fromkeys(elements, 0)
    if not unread and not elements:
        return counts, rows_with_null_elements
    for task in source.tasks:
        for batch in batches(task):
            for name in unread:
                counts[name] += batch.column(name).null_count
            for name in elements:
                column = batch.column(name)
                holders = pc.filter(pc.list_parent_indices(column), pc.is_null(pc.list_flatten(column)))
                rows_with_null_elements[name] += len(pc.unique(holders))
    return counts, rows_with_null_elements


def _parquet_footer_null_counts(source: Any, names: list[str]) -> dict[str, int]:
    """NULL counts of top-level primitive columns from local Parquet footers, where every row group has them."""
    import pyarrow.parquet as pq

    from streaming.storage.out_argument import normalize_root
    from streaming.storage.url import is_remote

    if source.kind != "parquet" or not names or any(is_remote(task.url) for task in source.tasks):
        return {}
    counts = dict.fromkeys(names, 0)
    for task in source.tasks:
        metadata = pq.ParquetFile(normalize_root(task.url)).metadata
        leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
        groups = task.row_groups if task.row_groups is not None else range(metadata.num_row_groups)
        for name in list(counts):
            statistics = [
                metadata.row_group(group).column(leaves[name]).statistics if name in leaves else None
                for group in groups
            ]
            known = [item.null_count for item in statistics if item is not None and item.has_null_count]
            if len(known) == len(statistics):
                counts[name] += sum(known)
            else:
                del counts[name]
    return counts
