"""`convert SRC OUT`: Parquet, Delta, JSON Lines, CSV or a saved Hugging Face dataset → an MDS dataset.

With Spark (`--spark`, or a session already active in this process, or a Databricks runtime) the input is read
by Spark and written by `streaming.spark.dataframe_to_mds`. Otherwise pyarrow reads it in a process pool
(`streaming.convert.arrow_engine.convert_files`). Both are engines of one conversion driver
(`streaming.convert.driver`): same type rules, encoder, task attempts and commit, so they write the same dataset.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from streaming.cli.console import OK, UsageError, counted, emit, human_bytes, note, progress

EXAMPLES = """\
examples:
  mds-streaming convert data.parquet /tmp/ds                       # every column, default encodings
  mds-streaming convert s3://bucket/events/ s3://bucket/mds --compression zstd --hashes xxh64
  mds-streaming convert logs.jsonl /tmp/ds --columns text:str,label:int64 --size-limit 32mb
  mds-streaming convert /data/hf_saved /tmp/ds --split train      # a datasets.save_to_disk folder
  mds-streaming convert /delta/table /tmp/ds --mode append         # a Delta path (deltalake, or --spark)
  mds-streaming convert main.sales.orders /Volumes/c/s/v/ds --spark   # a table name needs Spark
"""


#: A conversion's Python keywords, as this command's options.
COMMAND_LINE_CHOICES = {
    "mode='overwrite'": "--mode overwrite",
    "mode='append'": "--mode append",
    "mode='error'": "--mode error",
    "pass matching `columns`": "pass matching --columns",
}


def for_the_command_line(message: str) -> str:
    """``message`` with the choices it names as Python keywords written as this command's options."""
    for keyword, option in COMMAND_LINE_CHOICES.items():
        message = message.replace(keyword, option)
    return message


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
    try:
        if _use_spark(args):
            result = _convert_with_spark(args, columns, compression, hashes, size_limit)
        else:
            result = _convert_with_arrow(args, columns, compression, hashes, size_limit)
    except (FileExistsError, ValueError) as err:
        # The conversion's refusals name Python's keywords; at a shell the same choices are options.
        text = for_the_command_line(str(err))
        if text == str(err):
            raise
        raise type(err)(text) from None
    text = (
        f"wrote {counted(result['samples'], 'sample')} in {counted(result['shards'], 'shard')} "
        f"({human_bytes(result['bytes'])}) "
        # In the order MDS stores them (by name), the order `inspect` and every reader show.
        f"to {result['path']}\ncolumns: " + ", ".join(f"{k}={v}" for k, v in sorted(result["columns"].items()))
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
    return {**_summary(result), "engine": "spark"}


def _convert_with_arrow(
    args: argparse.Namespace,
    columns: dict[str, str | None] | None,
    compression: str | None,
    hashes: list[str],
    size_limit: int | None,
) -> dict[str, Any]:
    from streaming.convert.arrow_engine import convert_input
    from streaming.convert.arrow_inputs import InputChoiceError, detect, looks_like_table_name

    if looks_like_table_name(args.src):
        raise UsageError(
            f"{args.src!r} is neither a file nor a folder here; if it is a table name, pass --spark "
            f"(reading a catalog table needs Spark)."
        )
    try:
        source = detect(args.src, args.kind, args.workers, args.split)
    except InputChoiceError as err:
        raise UsageError(str(err)) from None
    bar = progress(
        args, total=source.rows or len(source.tasks), unit="rows" if source.rows else "files", desc="convert"
    )

    def task_done(task: Any) -> None:
        bar.update(task.rows or 1)

    try:
        result = convert_input(
            source,
            args.out,
            columns=columns,
            compression=compression,
            hashes=tuple(hashes),
            size_limit=size_limit,
            mode=args.mode,
            workers=args.workers,
            nulls=args.nulls,
            on_task_done=task_done,
        )
    finally:
        bar.close()
    note(args, f"converted {len(source.tasks)} task(s) of {source.kind} input")
    return {**_summary(result), "engine": "pyarrow", "source_kind": source.kind}


def _summary(result: Any) -> dict[str, Any]:
    """The `--json` document of a conversion (`streaming.convert.driver.ConversionResult`)."""
    return {
        "path": result.path,
        "shards": result.shards,
        "samples": result.samples,
        "bytes": result.bytes,
        "columns": result.columns,
        "nulls": {"masks": result.nulls, "as_json": result.nulls_json, "counted_by": result.nulls_counted_by},
        "mode": result.mode,
        "run": result.run,
    }


def _file_kind(src: str) -> str | None:
    lowered = src.lower().rstrip("/")
    for suffix, kind in ((".parquet", "parquet"), (".jsonl", "jsonl"), (".json", "jsonl"), (".csv", "csv")):
        if lowered.endswith(suffix):
            return kind
    return None
