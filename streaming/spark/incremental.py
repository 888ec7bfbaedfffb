"""`incremental_to_mds`: append what is new in a Delta table to an MDS dataset, safely re-runnable on a schedule.

Each run converts the rows added to the table between the version the dataset holds and the target version
(the latest by default) into its own folder ``increments/v<version>-<run>/`` of the dataset (one per run, so
two runs never share files), then commits those shards to the dataset's commit log
(`streaming.format.commit_log`) with a record of the table version: one create-only write, after which
``index.json`` is rewritten. The dataset's state is therefore the log: the newest ``increments/v<version>``
named by a shard path is the version it holds, committed together with its rows, so a run that dies anywhere
before the commit leaves the dataset as it was and the next run simply redoes the work (the dead run's
folder is a leftover for `streaming.vacuum`). A run at the version the dataset already holds changes
nothing. Every run also leaves ``increment.json`` in its folder (what it found and how); for versions that
bring no new rows (an OPTIMIZE, a delete) it is what tells the next run there is nothing to do. Two runs for
one dataset at once cannot both append a version: the second to commit finds the first's commit and fails.

New rows come from the table's Change Data Feed when it is enabled (inserted rows only), otherwise from the
difference of the two table snapshots. Versions that rewrite the table (an overwrite, ``REPLACE``,
``RESTORE``), recognised from the table history, are never read from the feed (it reports every rewritten
row as inserted): they too go through the snapshot diff. The diff compares a SHA-256 of each row's canonical
JSON (map entries sorted by key), as a multiset, so it works for every column type the converter accepts,
maps included, and tells rows rewritten by OPTIMIZE from new ones. MDS datasets are append-only: rows
deleted or updated in the table stay in the dataset as they were, and the result counts them in
``unapplied_changes``. A dataset first written by ``dataframe_to_mds(table, out)`` continues from the table
version that conversion recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from streaming.convert.runs import INCREMENTS, increment_folder_prefix, increment_version, new_increment_folder
from streaming.convert.source import Source
from streaming.format import commit_log
from streaming.format.index import read_index, rebase, stored_file
from streaming.spark.convert import dataframe_to_mds
from streaming.spark.executor_access import check_executor_access
from streaming.spark.schema import resolve_columns
from streaming.spark.table_input import (
    active_session,
    frame_from_arrow,
    looks_like_path,
    quote_table_name,
    resolve,
    sql_identifier,
)
from streaming.storage.dataset_root import DatasetRoot

logger = logging.getLogger(__name__)

RECORD_BASENAME = "increment.json"
CDF_PROPERTY = "delta.enableChangeDataFeed"
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
#: Table history operations that rewrite rows: the Change Data Feed reports every row they wrote as inserted.
REWRITES = ("CREATE OR REPLACE TABLE", "REPLACE TABLE", "REPLACE TABLE AS SELECT", "RESTORE", "OPTIMIZE")


@dataclass(frozen=True)
class IncrementResult:
    """What one run of ``incremental_to_mds`` did.

    Attributes:
        path: the dataset root.
        table: the table name or Delta path, as given.
        previous_version: the table version the dataset held before the run (None: there was no dataset).
        version: the table version the dataset holds now.
        method: ``"up_to_date"`` (nothing to do), ``"snapshot"`` (first run: the whole table),
            ``"change_data_feed"`` or ``"snapshot_diff"`` (how the new rows were found).
        samples: rows appended by this run.
        shards: shards appended by this run.
        unapplied_changes: rows deleted or updated in the table since ``previous_version``, which an
            append-only dataset keeps as they were.
    """

    path: str
    table: str
    previous_version: int | None
    version: int
    method: str
    samples: int
    shards: int
    unapplied_changes: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def incremental_to_mds(
    table: str,
    out: str,
    *,
    version: int | None = None,
    spark: Any = None,
    columns: Mapping[str, str] | Sequence[str] | None = None,
    compression: str | None = "zstd",
    hashes: Sequence[str] = (),
    size_limit: int | str | None = "64mb",
    change_data_feed: bool | None = None,
    progress: bool = True,
    executor_env: Mapping[str, str] | None = None,
    nulls: str = "mask",
) -> IncrementResult:
    """Append the rows added to the Delta table ``table`` since the dataset at ``out`` was last updated.

    Args:
        table: a Delta table name (``catalog.schema.table``) or a Delta table path.
        out: the dataset root (as for ``dataframe_to_mds``); created by the first run.
        version: the table version to bring the dataset up to (default: the latest).
        spark: the SparkSession to read the table with (default: the active one).
        columns, compression, hashes, size_limit, progress, executor_env, nulls: as for ``dataframe_to_mds``;
            ``columns`` must give the dataset's columns on every run. With default columns, a column holding
            NULLs gets a NULL mask on the run that creates the dataset and keeps it on every later run; NULLs
            that first appear in a later version in a column stored without a mask are refused, naming it
            (see ``streaming.convert.null_plan``).
        change_data_feed: True to require the table's Change Data Feed, False to always diff snapshots,
            None to use the feed when the table has ``delta.enableChangeDataFeed`` set.

    Returns:
        An :class:`IncrementResult`.
    """
    if not isinstance(table, str) or not table:
        raise TypeError(f"`table` must be a Delta table name or path, got {table!r}.")
    session = active_session(spark)
    destination = DatasetRoot(out)
    check_executor_access(destination.url, executor_env, session)
    base = commit_log.read_snapshot(destination)
    existing = base.shards
    held = held_version(destination, table, base)
    current, source = resolve(table, session, version)
    if source.version is None:
        raise ValueError(
            f"{table!r} is not a Delta table, so it has no versions to convert incrementally. "
            f"Choices: a Delta table, or dataframe_to_mds({table!r}, out, mode='overwrite') to "
            f"convert it whole."
        )
    target = source.version
    if held is not None and target < held:
        raise ValueError(
            f"The dataset at {destination.url} already holds version {held} of {table!r}; "
            f"version {target} is older. Choices: version >= {held}, or another `out`."
        )
    if held == target or (held is not None and _empty_increment_recorded(destination, held, target)):
        logger.info("incremental_to_mds: %s already holds version %d of %s", destination.url, target, table)
        return IncrementResult(destination.url, table, held, target, "up_to_date", 0, 0, 0)

    resolve_columns(current.schema, columns)  # bad `columns` fail before any job
    rows, method, unapplied = _new_rows(session, table, source, current, held, change_data_feed)
    folder = new_increment_folder(target)
    staged = dataframe_to_mds(
        rows,
        destination.child(folder),
        columns=columns,
        compression=compression,
        hashes=hashes,
        size_limit=size_limit,
        mode="overwrite",
        spark=session,
        progress=progress,
        executor_env=executor_env,
        nulls=nulls,
        join_shards=existing,
    )
    result = IncrementResult(destination.url, table, held, target, method, staged.samples, staged.shards, unapplied)
    destination.write_text(
        f"{folder}/{RECORD_BASENAME}",
        json.dumps(
            {**result.to_json(), "run": staged.run, "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            indent=2,
            sort_keys=True,
        ),
    )
    if staged.shards:
        _publish(destination, table, held, folder, base)
    if unapplied:
        logger.warning(
            "incremental_to_mds: %d rows of %s were deleted or updated after version %s; the MDS "
            "dataset is append-only and keeps them as they were.",
            unapplied,
            table,
            held,
        )
    logger.info(
        "incremental_to_mds: %s %s -> %d: %d rows in %d shards (%s)",
        table,
        held,
        target,
        staged.samples,
        staged.shards,
        method,
    )
    return result


def held_version(destination: DatasetRoot, table: str, state: commit_log.Snapshot) -> int | None:
    """The version of ``table`` the committed state holds, or None for an empty dataset.

    Raises ValueError when the dataset has shards but no record of coming from ``table``.
    """
    shards = state.shards
    versions = [found for found in map(_increment_version, shards) if found is not None]
    if versions:
        return max(versions)
    if not shards:
        return None
    converted = _converted_version(table, state)
    if converted is None:
        count = f"{len(shards)} shard" + ("s" if len(shards) != 1 else "")
        raise ValueError(
            f"{destination.url} holds {count} but no record of which version of "
            f"{table!r} they came from (it was written neither by incremental_to_mds nor by "
            f"dataframe_to_mds from this table). Choices: another `out`, or rebuild it with "
            f"dataframe_to_mds({table!r}, out, mode='overwrite') and run again."
        )
    return converted


def _shard_basename(shard: dict[str, Any]) -> str:
    return stored_file(shard)["basename"]


def _increment_version(shard: dict[str, Any]) -> int | None:
    return increment_version(_shard_basename(shard))


def _converted_version(table: str, state: commit_log.Snapshot) -> int | None:
    """The table version recorded by the ``dataframe_to_mds`` run the state holds, if it converted ``table``.

    With a commit log the metadata comes from the same commit as the shards. A dataset without one has it
    in ``mds_conversion.json``, which an older version wrote before the index, so a crash between the two
    left it newer than the index: there the newest recorded run whose shards the index holds counts.
    """
    metadata = state.metadata or {}
    runs = [metadata.get("latest") or {}] if state.logged else list(reversed(metadata.get("runs") or []))
    for run in runs:
        source = run.get("source") or {}
        if source.get("name") != table or source.get("version") is None:
            continue
        prefix = f"{run.get('run')}/"
        if state.logged or any(_shard_basename(shard).startswith(prefix) for shard in state.shards):
            return int(source["version"])
    return None


def _empty_increment_recorded(destination: DatasetRoot, held: int, target: int) -> bool:
    """Whether an earlier run found no new rows between ``held`` and ``target`` (and so published nothing)."""
    prefix = increment_folder_prefix(target)
    for relative in destination.list_relative(INCREMENTS):
        folder, _, name = relative.rpartition("/")
        if name != RECORD_BASENAME or not (folder == prefix or folder.startswith(f"{prefix}-")):
            continue
        with contextlib.suppress(ValueError):  # a record being written, or left torn by a crash
            record = json.loads(destination.read_text(relative) or "")
            if record.get("previous_version") == held and record.get("samples") == 0:
                return True
    return False


def _new_rows(
    session: Any, table: str, source: Source, current: Any, held: int | None, change_data_feed: bool | None
) -> tuple[Any, str, int]:
    """The rows to append, how they were found, and how many table changes they cannot reflect."""
    if held is None:
        return current, "snapshot", 0
    rewrites = _rewrites(session, table, source, held)
    if rewrites and change_data_feed:
        raise ValueError(
            f"change_data_feed=True but versions {held + 1}..{source.version} of {table!r} rewrite the table "
            f"({', '.join(rewrites)}), and the feed reports every row they wrote as inserted. Choices: "
            f"change_data_feed=None to compare snapshots for such versions."
        )
    if change_data_feed is not False and not rewrites:
        enabled = _cdf_enabled(session, table, source, held)
        if enabled:
            try:
                inserts, unapplied = _change_feed(session, table, source, held)
                return inserts, "change_data_feed", unapplied
            except Exception as err:
                if change_data_feed:
                    raise
                logger.warning(
                    "incremental_to_mds: the Change Data Feed of %s cannot be read for versions "
                    "%d..%d (%s); comparing snapshots instead.",
                    table,
                    held + 1,
                    source.version,
                    err,
                )
        elif change_data_feed:
            raise ValueError(
                f"change_data_feed=True but {table!r} does not have {CDF_PROPERTY} = true at "
                f"versions {held} and {source.version}. Choices: enable it (ALTER TABLE ... SET "
                f"TBLPROPERTIES ({CDF_PROPERTY} = true)), or change_data_feed=None to compare "
                f"snapshots."
            )
    previous, _ = resolve(table, session, held)
    added, unapplied = snapshot_diff(previous, current)
    return added, "snapshot_diff", unapplied


def snapshot_diff(previous: Any, current: Any) -> tuple[Any, int]:
    """Rows of ``current`` not in ``previous`` (as multisets), and how many of ``previous`` are gone.

    Rows are compared by a SHA-256 of their canonical JSON (`row_digest`), which Spark can compare for
    every type (``exceptAll`` cannot compare maps); each row is numbered within its digest, so two equal
    rows in ``current`` against one in ``previous`` still leave one to append.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def numbered(frame: Any) -> Any:
        digest = row_digest(frame)
        within = Window.partitionBy("_mds_digest").orderBy(F.lit(1))
        return frame.withColumn("_mds_digest", digest).withColumn("_mds_copy", F.row_number().over(within))

    keys = ["_mds_digest", "_mds_copy"]
    new, old = numbered(current), numbered(previous).select(*keys)
    unapplied = old.join(new.select(*keys), keys, "left_anti").count()
    return new.join(old, keys, "left_anti").drop(*keys), unapplied


def row_digest(frame: Any) -> Any:
    """A column: SHA-256 of the row's JSON with every top-level map's entries sorted by key."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    parts = []
    for field in frame.schema.fields:
        column = F.col(f"`{field.name}`")
        if isinstance(field.dataType, MapType):
            column = F.array_sort(F.map_entries(column), lambda a, b: _key_order(a, b))
        parts.append(column.alias(field.name))
    return F.sha2(F.to_json(F.struct(*parts)), 256)


def _key_order(left: Any, right: Any) -> Any:
    from pyspark.sql import functions as F

    return F.when(left["key"] < right["key"], -1).when(left["key"] > right["key"], 1).otherwise(0)


def _rewrites(session: Any, table: str, source: Source, held: int) -> list[str]:
    """History operations of versions ``held + 1 .. source.version`` that rewrite the table's rows."""
    if source.reader == "deltalake":
        from deltalake import DeltaTable

        entries = [
            (entry.get("version"), entry.get("operation"), entry.get("operationParameters") or {})
            for entry in DeltaTable(table).history()
        ]
    else:
        rows = session.sql(f"DESCRIBE HISTORY {sql_identifier(table)}").collect()
        entries = [(row["version"], row["operation"], row["operationParameters"] or {}) for row in rows]
    found = []
    for version, operation, parameters in entries:
        if version is None or source.version is None or not held < int(version) <= source.version:
            continue
        mode = str(parameters.get("mode", "")).strip('"').lower()
        if str(operation).upper() in REWRITES or mode == "overwrite":
            found.append(f"version {version}: {operation}" + (" (overwrite)" if mode == "overwrite" else ""))
    return sorted(found)


def _is_true(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _cdf_enabled(session: Any, table: str, source: Source, held: int) -> bool:
    """Whether the table records its Change Data Feed (at ``held`` and now, for delta-rs; now, for Spark)."""
    if source.reader == "deltalake":
        from deltalake import DeltaTable

        return all(
            _is_true(DeltaTable(table, version=v).metadata().configuration.get(CDF_PROPERTY))
            for v in (held, source.version)
        )
    rows = session.sql(f"SHOW TBLPROPERTIES {sql_identifier(table)}").collect()
    return any(row["key"] == CDF_PROPERTY and _is_true(row["value"]) for row in rows)


def _change_feed(session: Any, table: str, source: Source, held: int) -> tuple[Any, int]:
    """Rows inserted in versions ``held + 1 .. source.version``, and the count of deletes and updates."""
    if source.reader == "deltalake":
        return _change_feed_deltalake(session, table, source, held)
    reader = (
        session.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", held + 1)
        .option("endingVersion", source.version)
    )
    changes = reader.load(table) if looks_like_path(table) else reader.table(quote_table_name(table))
    changes.schema  # noqa: B018 - resolves the feed now, so a range the feed does not cover fails here
    unapplied = changes.where("_change_type IN ('delete', 'update_postimage')").count()
    return changes.where("_change_type = 'insert'").drop(*CDF_COLUMNS), unapplied


def _change_feed_deltalake(session: Any, table: str, source: Source, held: int) -> tuple[Any, int]:
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    snapshot = DeltaTable(table, version=source.version)
    schema = pa.schema(snapshot.schema().to_arrow())
    feed = snapshot.load_cdf(starting_version=held + 1, ending_version=source.version)
    # The feed in the table's own types: delta-rs hands Arrow's view types (string_view), which pyarrow < 16 cannot
    # read, so the stream is asked for these instead (pyarrow 14 has the capsule import but not from_stream).
    extra = {"_change_type": pa.string(), "_commit_version": pa.int64(), "_commit_timestamp": pa.timestamp("us", "UTC")}
    wanted = pa.schema(
        [schema.field(name) if name in schema.names else (name, extra[name]) for name in feed.schema.names]
    )
    if hasattr(pa.RecordBatchReader, "from_stream"):
        reader = pa.RecordBatchReader.from_stream(feed, schema=wanted)
    else:
        reader = pa.RecordBatchReader._import_from_c_capsule(feed.__arrow_c_stream__(wanted.__arrow_c_schema__()))
    changes = reader.read_all()
    kinds = changes.column("_change_type").cast(pa.string())
    unapplied = pc.sum(pc.is_in(kinds, pa.array(["delete", "update_postimage"]))).as_py() or 0
    inserts = changes.select(schema.names).cast(schema).filter(pc.equal(kinds, "insert"))
    return frame_from_arrow(session, inserts), int(unapplied)


def _publish(destination: DatasetRoot, table: str, held: int | None, folder: str, base: commit_log.Snapshot) -> None:
    """The commit: append the staged shards on top of ``base``, unless another run moved the dataset.

    The commit log's create-only commit decides between concurrent runs: a run that finds a newer commit
    than the one it started from checks which version that commit holds, and fails if it is not ``held``.
    """
    staged = read_index(DatasetRoot(destination.child(folder)), missing_ok=True)
    added = [rebase(shard, folder) for shard in staged]

    def still_held(newer: commit_log.Snapshot) -> None:
        now_held = held_version(destination, table, newer)
        if now_held != held:
            raise RuntimeError(
                f"Another run updated {destination.url} (it now holds version {now_held} of {table!r}, "
                f"this run started from {held}); its rows were not appended twice. This run's rows stay "
                f"unpublished in {folder}/ (`streaming.vacuum` removes them)."
            )

    still_held(commit_log.read_snapshot(destination))  # a legacy writer may have moved index.json meanwhile
    state = commit_log.commit(destination, commit_log.APPEND, added, base=base, check=still_held)
    commit_log.publish_checkpoint(destination, state)
