"""`incremental TABLE OUT`: bring a dataset up to a Delta table's newest version, appending or mirroring.

The command line face of `streaming.spark.incremental_to_mds`, for a scheduled job that is a shell command (cron,
a Databricks job's Python wheel or shell task): a Delta path is read with delta-rs and written here, without Spark;
a table name (``catalog.schema.table``) needs a running Spark session and is better run from a notebook.
``--mode mirror --key COLUMNS`` keeps the dataset equal to the table (deleted rows removed, updated rows replaced),
rewriting only the shards a change touches (`streaming.incremental.mirror`); without ``--key``, a table with Delta row
tracking is keyed by its row ids.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from streaming.cli.console import OK, emit

EXAMPLES = """\
examples:
  mds-streaming incremental /data/events_delta s3://bucket/events_mds                # append what is new
  mds-streaming incremental /data/users_delta /data/users_mds --mode mirror --key id  # deletes reach the data
  mds-streaming incremental /data/users_delta /data/users_mds --mode mirror --key id --resync
  mds-streaming incremental /data/tracked_delta /data/tracked_mds --mode mirror  # keyed by Delta row ids
"""

FEED_CHOICES = {"auto": None, "on": True, "off": False}


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "incremental",
        parents=[common],
        help="bring a dataset up to a Delta table's newest version (append, or mirror deletes and updates)",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("table", help="a Delta table path (read with delta-rs) or a table name (needs Spark)")
    parser.add_argument("out", help="dataset root, any URL; created by the first run")
    parser.add_argument("--mode", choices=("append", "mirror"), default="append", help="default: append")
    parser.add_argument(
        "--key",
        help="with --mode mirror: the comma-separated columns that identify a row (without it, a table's Delta row "
        "tracking ids)",
    )
    parser.add_argument("--version", type=int, help="the table version to reach (default: the newest)")
    parser.add_argument(
        "--change-data-feed", choices=tuple(FEED_CHOICES), default="auto", help="read the table's feed: auto (default)"
    )
    parser.add_argument("--resync", action="store_true", help="re-derive the change from the dataset's own rows")
    parser.add_argument("--compression", default="zstd", help="shard compression (default zstd; none for none)")
    parser.add_argument("--size-limit", default="64mb", help="shard size limit (default 64mb)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.cli.console import UsageError

    incremental_to_mds = _job_for(args.table)
    key = [name.strip() for name in args.key.split(",") if name.strip()] if args.key else None
    if args.mode == "append" and key:
        raise UsageError("--key is for --mode mirror; an append-only dataset has no key")
    result = incremental_to_mds(
        args.table,
        args.out,
        version=args.version,
        compression=None if args.compression in ("", "none", "None") else args.compression,
        size_limit=args.size_limit,
        change_data_feed=FEED_CHOICES[args.change_data_feed],
        progress=not (args.quiet or args.json),
        resync=args.resync,
        mode=args.mode,
        key=key,
    )
    document = dataclasses.asdict(result)
    lines = [
        f"{result.path}: table version {result.previous_version} -> {result.version} ({result.method}, {result.mode})",
        f"appended {result.samples} row(s) in {result.shards} shard(s)",
    ]
    if result.mode == "mirror":
        lines.append(f"removed {result.removed} row(s), rewrote {result.shards_rewritten} shard(s)")
    elif result.unapplied_changes:
        lines.append(f"{result.unapplied_changes} row(s) the table deleted or updated stay (append mode)")
    if result.ignored_columns:
        lines.append(f"table columns the dataset does not hold: {', '.join(result.ignored_columns)}")
    emit(args, document, "\n".join(lines))
    return OK


def _job_for(table: str) -> Any:
    """The job's face for ``table``: Spark's for a table name or when a Spark session runs in this process (the
    choice between Spark's reader and delta-rs's is then Spark's to make), else the engine-neutral one."""
    from streaming.delta.location import looks_like_path

    if looks_like_path(table) and not _spark_session_running():
        from streaming.incremental import incremental_to_mds

        return incremental_to_mds
    from streaming.spark import incremental_to_mds as with_spark

    return with_spark


def _spark_session_running() -> bool:
    """Whether this process runs a Spark session (pyspark is never imported here just to ask)."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None
