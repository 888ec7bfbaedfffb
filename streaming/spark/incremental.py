"""`incremental_to_mds`: append what is new in a Delta table to an MDS dataset, safely re-runnable on a schedule.

Each run converts the rows added to the table between the version the dataset holds and the target version
(the latest by default) into its own folder ``increments/v<version>/`` of the dataset, then publishes the
dataset's ``index.json`` with those shards appended: one atomic write. The dataset's state is therefore the
index itself: the newest ``increments/v<version>/`` named by a shard path is the version it holds, committed
together with its rows, so a run that dies anywhere before the index write leaves the dataset as it was and
the next run simply redoes the work. A run at the version the dataset already holds changes nothing. Every
run also leaves ``increments/v<version>/increment.json`` (what it found and how); for versions that bring no
new rows (an OPTIMIZE, a delete) it is what tells the next run there is nothing to do.

New rows come from the table's Change Data Feed when it is enabled (inserted rows only), otherwise from the
difference of the two table snapshots (``exceptAll``, which also tells rows rewritten by OPTIMIZE from new
ones). MDS datasets are append-only: rows deleted or updated in the table stay in the dataset as they were,
and the result counts them in ``unapplied_changes``. A dataset first written by
``dataframe_to_mds(table, out)`` continues from the table version that conversion recorded.

Run one job per dataset at a time (a Databricks job's default of one concurrent run does this).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from streaming.format.index import publish_index, rebase, stored_file
from streaming.spark import commit
from streaming.spark.convert import dataframe_to_mds
from streaming.spark.executor_access import check_executor_access
from streaming.spark.schema import resolve_columns
from streaming.spark.source import (
    Source,
    active_session,
    frame_from_arrow,
    looks_like_path,
    quote_table_name,
    resolve,
    sql_identifier,
)
from streaming.storage.destination import Destination

logger = logging.getLogger(__name__)

INCREMENTS = "increments"
RECORD_BASENAME = "increment.json"
CDF_PROPERTY = "delta.enableChangeDataFeed"
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
_INCREMENT_PATH = re.compile(rf"^{INCREMENTS}/v(\d+)/")


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
) -> IncrementResult:
    """Append the rows added to the Delta table ``table`` since the dataset at ``out`` was last updated.

    Args:
        table: a Delta table name (``catalog.schema.table``) or a Delta table path.
        out: the dataset root (as for ``dataframe_to_mds``); created by the first run.
        version: the table version to bring the dataset up to (default: the latest).
        spark: the SparkSession to read the table with (default: the active one).
        columns, compression, hashes, size_limit, progress, executor_env: as for ``dataframe_to_mds``;
            ``columns`` must give the dataset's columns on every run.
        change_data_feed: True to require the table's Change Data Feed, False to always diff snapshots,
            None to use the feed when the table has ``delta.enableChangeDataFeed`` set.

    Returns:
        An :class:`IncrementResult`.
    """
    if not isinstance(table, str) or not table:
        raise TypeError(f"`table` must be a Delta table name or path, got {table!r}.")
    session = active_session(spark)
    destination = Destination(out)
    check_executor_access(destination.url, executor_env)
    existing = commit.read_index(destination)
    held = held_version(destination, table, existing)
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

    plan = resolve_columns(current.schema, columns)
    commit.check_append_columns(existing, plan, destination.url)
    rows, method, unapplied = _new_rows(session, table, source, current, held, change_data_feed)
    folder = increment_folder(target)
    staged = dataframe_to_mds(
        rows,
        destination.child(folder),
        columns=plan,
        compression=compression,
        hashes=hashes,
        size_limit=size_limit,
        mode="overwrite",
        spark=session,
        progress=progress,
        executor_env=executor_env,
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
        _publish(destination, table, held, folder)
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


def increment_folder(version: int) -> str:
    """The dataset-relative folder holding the rows that brought the dataset up to table ``version``."""
    return f"{INCREMENTS}/v{version:08d}"


def held_version(destination: Destination, table: str, shards: list[dict[str, Any]]) -> int | None:
    """The version of ``table`` the published index holds, or None for an empty dataset.

    Raises ValueError when the dataset has shards but no record of coming from ``table``.
    """
    versions = [found for found in map(_increment_version, shards) if found is not None]
    if versions:
        return max(versions)
    if not shards:
        return None
    converted = _converted_version(destination, table, shards)
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
    match = _INCREMENT_PATH.match(_shard_basename(shard))
    return int(match.group(1)) if match else None


def _converted_version(destination: Destination, table: str, shards: list[dict[str, Any]]) -> int | None:
    """The table version recorded by the ``dataframe_to_mds`` run the index holds, if it converted ``table``."""
    text = destination.read_text(commit.METADATA_BASENAME)
    try:
        latest = json.loads(text or "{}").get("latest") or {}
    except ValueError:
        return None
    source = latest.get("source") or {}
    if source.get("name") != table or source.get("version") is None:
        return None
    prefix = f"{latest.get('run')}/"
    if not any(_shard_basename(shard).startswith(prefix) for shard in shards):
        return None
    return int(source["version"])


def _empty_increment_recorded(destination: Destination, held: int, target: int) -> bool:
    """Whether an earlier run found no new rows between ``held`` and ``target`` (and so published nothing)."""
    text = destination.read_text(f"{increment_folder(target)}/{RECORD_BASENAME}")
    if text is None:
        return False
    record = json.loads(text)
    return record.get("previous_version") == held and record.get("samples") == 0


def _new_rows(
    session: Any, table: str, source: Source, current: Any, held: int | None, change_data_feed: bool | None
) -> tuple[Any, str, int]:
    """The rows to append, how they were found, and how many table changes they cannot reflect."""
    if held is None:
        return current, "snapshot", 0
    if change_data_feed is not False:
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
    unapplied = previous.exceptAll(current).count()
    return current.exceptAll(previous), "snapshot_diff", unapplied


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
    feed = snapshot.load_cdf(starting_version=held + 1, ending_version=source.version)
    changes = pa.RecordBatchReader.from_stream(feed).read_all()
    kinds = changes.column("_change_type").cast(pa.string())
    unapplied = pc.sum(pc.is_in(kinds, pa.array(["delete", "update_postimage"]))).as_py() or 0
    schema = pa.schema(snapshot.schema().to_arrow())
    inserts = changes.select(schema.names).cast(schema).filter(pc.equal(kinds, "insert"))
    return frame_from_arrow(session, inserts), int(unapplied)


def _publish(destination: Destination, table: str, held: int | None, folder: str) -> None:
    """The commit: re-read the index, check no other run moved it, and write it with the staged shards added."""
    shards = commit.read_index(destination)
    now_held = held_version(destination, table, shards)
    if now_held != held:
        raise RuntimeError(
            f"Another run updated {destination.url} (it now holds version {now_held} of {table!r}, "
            f"this run started from {held}); run one incremental job per dataset at a time. "
            f"This run's rows stay unpublished in {folder}/ and the next run replaces them."
        )
    staged = commit.read_index(Destination(destination.child(folder)))
    added = [rebase(shard, folder) for shard in staged]
    publish_index(destination.url, shards + added)
