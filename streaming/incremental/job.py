"""`incremental_to_mds`: bring an MDS dataset up to a newer version of a Delta table, safely re-runnable on a schedule.

**What the dataset holds** (the one semantics of the default ``mode="append"``, whatever the table's history and
however the run reads it; ``mode="mirror"``, `streaming.incremental.mirror`, holds exactly the table's rows instead).
A run brings the dataset from the table version it holds, ``h``, to a version ``t``: it appends the rows of
``t`` that ``h`` did not have, ``rows(t) - rows(h)`` as multisets, and removes nothing. So the first run
holds version ``t``'s rows; after runs at versions ``v1 < v2 < ... < vn`` the dataset holds
``rows(v1) + (rows(v2) - rows(v1)) + ... + (rows(vn) - rows(vn-1))``. In table terms:

* appended rows are appended; an updated row's new value is appended and its old value stays; a deleted row
  stays; a MERGE is its inserts, updates and deletes; an overwrite, a ``REPLACE``/``CREATE OR REPLACE ... AS
  SELECT``, a ``TRUNCATE``, a ``RESTORE`` or a ``CLONE`` appends exactly the rows the new content has beyond the
  old (rewriting the same rows appends nothing);
* maintenance (``OPTIMIZE``, ``ZORDER BY``, auto compaction, predictive optimization, ``REORG``, ``VACUUM``,
  property and constraint changes: every commit whose actions are ``dataChange=false``) changes nothing, and a
  window of only such commits reads no rows at all;
* a column the table adds later is not in the dataset (its columns are fixed by its first run or by
  ``columns``), and rows are compared on the dataset's columns only; a dataset column the table drops stops the
  run, naming it;
* rows are compared by their identity (`streaming.convert.row_identity`): what the dataset stores of them, so
  at full precision (microseconds, NaN and -0.0, decimals, binary, nested values), NULL told apart from zero.

``unapplied_changes`` counts the rows of ``h`` that ``t`` no longer has (``rows(h) - rows(t)``): deleted rows
and old values of updated rows, which the append-only dataset keeps.

**How a run reads the change**, cheapest first; every way gives the same rows (the generated-history oracle
in ``tests/incremental`` checks that on real delta-rs tables):

1. nothing, when no commit of the window changed data (only ``dataChange=false`` commits);
2. the Change Data Feed (``change_data_feed=None`` or True), when the feed was enabled at every version of the
   window (read from the history, not today's properties) and no commit of the window replaces the table or
   changes its schema: the rows it adds (inserts, update post-images) minus the rows it takes away (deletes,
   pre-images);
3. the changed files: the rows of the data files the window added minus those of the files it removed
   (``dataChange=true`` actions of the Delta log, files added and removed inside the window cancelled), so
   the cost follows the change, not the table (a file with a deletion vector is read whole and the rows its
   vector marks dropped);
4. both versions whole, when the changed files cannot be read one by one (column mapping, a shallow clone).

**When history is gone** (``VACUUM`` removed files the change needs, the log's retention removed its commit
files) the run stops with `IncrementalHistoryError`, naming the version and the way out: ``resync=True``
appends the rows of version ``t`` the dataset does not already hold, compared with the dataset's own stored
rows (it reads the whole dataset and table once; nothing is appended twice).

**The commit.** Each run that finds rows converts them into its own folder ``increments/v<version>-<run>/``
(`streaming.format.runs`), then makes one commit to the dataset's commit log (`streaming.format.commit_log`)
that adds those shards and records the table version (``source_versions``), even when no row was added, so
a later run starts from there. A run that dies before the commit changes nothing and the next redoes the
work (the dead run's folder is a leftover for ``vacuum``). Two runs from the same version cannot both commit:
the second to commit finds the first's version recorded and fails, appending nothing. Every run writes
with ``nulls="nullable"`` (`streaming.convert.null_plan`): every nullable column is masked from the first
run, so a NULL arriving later is stored as such, never refused. A dataset first written by
``dataframe_to_mds(table, out)`` continues from the table version that conversion recorded.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from streaming.convert.key_map import MIRROR, mirror_record
from streaming.convert.null_plan import WIDENING_POLICY, dataset_columns
from streaming.convert.row_identity import dataset_identities, value_columns
from streaming.delta.history import HistoryUnavailableError, TableWindow
from streaming.delta.table import FilesNotReadable
from streaming.format import commit_log
from streaming.format.index import read_index, rebase, stored_file
from streaming.format.runs import increment_version, new_increment_folder, new_run_id
from streaming.spark.executor_access import check_executor_access
from streaming.spark.table_changes import DeltaLakeChanges, SparkDeltaChanges
from streaming.spark.table_input import (
    active_session,
    latest_version,
    looks_like_path,
    spark_reads_delta,
    sql_identifier,
)
from streaming.storage.dataset_root import DatasetRoot

logger = logging.getLogger(__name__)

RECORD_BASENAME = "increment.json"
#: How a run found its rows (`IncrementResult.method`).
METHODS = (
    "up_to_date",
    "snapshot",
    "no_data_change",
    "change_data_feed",
    "snapshot_diff",
    "full_snapshot_diff",
    "resync",
)


class IncrementalHistoryError(RuntimeError):
    """The change between the version a dataset holds and the target can no longer be read from the table.

    Attributes:
        version: the first table version whose change is missing.
    """

    def __init__(self, message: str, version: int) -> None:
        super().__init__(message)
        self.version = version


@dataclass(frozen=True)
class IncrementResult:
    """What one run of ``incremental_to_mds`` did.

    Attributes:
        path: the dataset root.
        table: the table name or Delta path, as given.
        previous_version: the table version the dataset held before the run (None: there was no dataset).
        version: the table version the dataset holds now.
        method: how the new rows were found, one of `METHODS` (see the module docstring).
        samples: rows appended by this run.
        shards: shards appended by this run.
        unapplied_changes: rows of ``previous_version`` that ``version`` no longer has (deleted rows, old
            values of updated rows), which the append-only dataset keeps.
        ignored_columns: table columns the dataset does not hold (added to the table after its first run).
        mode: ``"append"`` or ``"mirror"`` (`streaming.incremental.mirror`).
        removed: rows a mirror run removed (deleted rows and old values of updated rows).
        shards_rewritten: shards a mirror run rewrote without those rows (copy on write).
        bytes_read: bytes of shard files a mirror run read to rewrite them.
        bytes_written: bytes of shard files a mirror run wrote in their place.
    """

    path: str
    table: str
    previous_version: int | None
    version: int
    method: str
    samples: int
    shards: int
    unapplied_changes: int
    ignored_columns: list[str] = field(default_factory=list)
    mode: str = "append"
    removed: int = 0
    shards_rewritten: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

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
    resync: bool = False,
    mode: str = "append",
    key: Sequence[str] | None = None,
) -> IncrementResult:
    """Bring the dataset at ``out`` up to version ``version`` (the latest by default) of the Delta table ``table``.

    Appends the rows the new version has that the version the dataset holds did not (the module docstring
    states it for every kind of history); with ``mode="mirror"`` the dataset holds exactly the table's rows
    instead (`streaming.incremental.mirror`).

    Args:
        table: a Delta table name (``catalog.schema.table``) or a Delta table path.
        out: the dataset root (as for ``dataframe_to_mds``); created by the first run.
        version: the table version to bring the dataset up to (default: the latest).
        spark: the SparkSession to read the table with (default: the active one). A Delta path is read with
            delta-rs where Spark has no Delta support or no session runs; its rows are then written on the
            driver, without a Spark job.
        columns, compression, hashes, size_limit, progress, executor_env: as for ``dataframe_to_mds``.
            ``columns`` fixes the dataset's columns on its first run; later runs keep them when it is None.
        nulls: ``"mask"`` (default): every nullable column gets a NULL mask from the first run, so later NULLs
            are stored as they come (``nulls="nullable"`` of ``dataframe_to_mds``); ``"error"``: a NULL stops
            the run, naming the column.
        change_data_feed: True to require the table's Change Data Feed, False never to read it, None to read it
            whenever it was enabled at every version of the window.
        resync: instead of reading the change since the version the dataset holds (when the table's history no
            longer has it), append the rows of the target version the dataset does not already hold, compared
            with the dataset's own rows.
        mode: ``"append"`` (default): the append-only semantics above; ``"mirror"``: after each run the dataset
            holds exactly the table's rows, deleted rows removed and updated rows replaced, rewriting only the
            shards that held them (`streaming.incremental.mirror`). A dataset keeps the mode of its first run.
        key: with ``mode="mirror"``, the columns that identify a row (unique in every table version); None for a
            Delta path with row tracking keys the mirror by its stable row ids, stored in the column ``_row_id``.

    Returns:
        An :class:`IncrementResult`.
    """
    if not isinstance(table, str) or not table:
        raise TypeError(f"`table` must be a Delta table name or path, got {table!r}.")
    if nulls not in ("mask", "error"):
        raise ValueError(f"nulls must be 'mask' or 'error', got {nulls!r}.")
    if mode == MIRROR:
        from streaming.incremental.mirror import mirror_to_mds  # builds on this module's readers

        return mirror_to_mds(
            table,
            out,
            key=key,
            version=version,
            spark=spark,
            columns=columns,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            change_data_feed=change_data_feed,
            nulls=nulls,
            resync=resync,
            progress=progress,
            executor_env=executor_env,
        )
    if mode != "append":
        raise ValueError(f"mode must be 'append' or 'mirror', got {mode!r}.")
    if key is not None:
        raise ValueError("`key` is for mode='mirror' only (the append-only job identifies rows by their values).")
    destination = DatasetRoot(out)
    session = _reading_session(spark, table)
    if session is not None:
        check_executor_access(destination.url, executor_env, session)  # Spark's tasks will write the shards
    source = open_table(session, table, version)
    base = commit_log.read_snapshot(destination)
    if mirror_record(base) is not None:
        raise ValueError(
            f"{destination.url} is a mirror of {table!r} (made with mode='mirror'): an append-only run would "
            f"leave its deleted rows out of step with its key map. Choices: mode='mirror', or another `out`."
        )
    held = held_version(destination, table, base)
    target = source.version
    if held is not None and target < held:
        raise ValueError(
            f"The dataset at {destination.url} already holds version {held} of {table!r}; "
            f"version {target} is older. Choices: version >= {held}, or another `out`."
        )
    if held == target and not resync:
        logger.info("incremental_to_mds: %s already holds version %d of %s", destination.url, target, table)
        return IncrementResult(destination.url, table, held, target, "up_to_date", 0, 0, 0)
    if resync and held is None:
        raise ValueError(f"resync=True needs an existing dataset at {destination.url}; the first run converts it.")

    existing = base.shards
    names, ignored, encodings = _dataset_columns(source, existing, columns, table)
    if held is None:
        rows, method, unapplied = source.snapshot(), "snapshot", 0
    else:
        if resync:
            rows = source.subtract(dataset_identities(destination, existing, encodings), names, encodings)
            method, unapplied = "resync", 0
        else:
            rows, unapplied, method = _change(source, table, held, names, encodings, change_data_feed)
    folder, staged_samples, staged_shards, run = None, 0, 0, new_run_id()
    if rows is not None:
        folder = new_increment_folder(target)
        staged = source.write(
            rows,
            destination.child(folder),
            columns=columns if columns is not None or held is None else names,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            mode="overwrite",
            progress=progress,
            executor_env=executor_env,
            nulls=WIDENING_POLICY if nulls == "mask" else nulls,
            join_shards=existing,
        )
        staged_samples, staged_shards, run = staged.samples, staged.shards, staged.run
    result = IncrementResult(
        destination.url, table, held, target, method, staged_samples, staged_shards, unapplied, ignored
    )
    record = {
        **result.to_json(),
        "run": run,
        "source": {"kind": "delta", "name": table, "version": target, "reader": source.reader},
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if folder is not None:
        destination.write_text(f"{folder}/{RECORD_BASENAME}", json.dumps(record, indent=2, sort_keys=True))
    _publish(destination, table, held, target, folder if staged_shards else None, base, record)
    if unapplied:
        logger.warning(
            "incremental_to_mds: %d rows of version %s of %s are no longer in version %d (deleted, or old values "
            "of updated rows); the MDS dataset is append-only and keeps them.",
            unapplied,
            held,
            table,
            target,
        )
    if ignored:
        logger.warning("incremental_to_mds: %s has columns the dataset does not hold: %s", table, ignored)
    logger.info(
        "incremental_to_mds: %s %s -> %d: %d rows in %d shards (%s)",
        table,
        held,
        target,
        staged_samples,
        staged_shards,
        method,
    )
    return result


def _reading_session(spark: Any, table: str) -> Any:
    """The SparkSession that reads ``table``, or None when delta-rs reads it (a Delta path where Spark has no
    Delta support or no session runs), decided without reading a row."""
    session = spark if spark is not None else _running_session()
    if looks_like_path(table) and (session is None or not spark_reads_delta(session, table)):
        return None
    return active_session(session)  # a table name needs Spark: this names the missing session


def open_table(session: Any, table: str, version: int | None) -> DeltaLakeChanges | SparkDeltaChanges:
    """The reader of ``table`` pinned to ``version`` (the latest when None), without reading any row: Spark's
    Delta reader with ``session``, delta-rs without one (see `_reading_session`)."""
    if session is None:
        return DeltaLakeChanges(table, version)
    latest = latest_version(session, sql_identifier(table))
    if latest is None:
        raise ValueError(
            f"{table!r} is not a Delta table, so it has no versions to convert incrementally. "
            f"Choices: a Delta table, or dataframe_to_mds({table!r}, out, mode='overwrite') to "
            f"convert it whole."
        )
    return SparkDeltaChanges(session, table, latest if version is None else version)


def _running_session() -> Any:
    """The active SparkSession, or None when there is none (or pyspark is not installed)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()


def held_version(destination: DatasetRoot, table: str, state: commit_log.Snapshot) -> int | None:
    """The version of ``table`` the committed state holds, or None for an empty dataset.

    Raises ValueError when the dataset has shards but no record of coming from ``table``.
    """
    if table in state.source_versions:
        return state.source_versions[table]
    if state.source_versions:
        raise ValueError(
            f"{destination.url} holds versions of {sorted(state.source_versions)}, not of {table!r}: one dataset "
            f"follows one table. Choices: the table it follows, or another `out`."
        )
    shards = state.shards
    # Datasets written before the state recorded source versions: the newest increment folder a shard lies in.
    found = (increment_version(stored_file(shard)["basename"]) for shard in shards)
    versions = [version for version in found if version is not None]
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
        if state.logged or any(stored_file(shard)["basename"].startswith(prefix) for shard in state.shards):
            return int(source["version"])
    return None


def _dataset_columns(
    source: DeltaLakeChanges | SparkDeltaChanges,
    existing: list[dict[str, Any]],
    columns: Mapping[str, str] | Sequence[str] | None,
    table: str,
) -> tuple[list[str], list[str], dict[str, str]]:
    """The value columns the dataset holds (or its first run will), the table's columns it does not hold, and
    the encodings rows are identified by (the dataset's own once it has shards)."""
    present = source.column_names()
    dataset = dataset_columns(existing)
    if dataset is None or columns is not None:
        plan = source.plan(columns)  # bad `columns` fail here, before any read
        chosen = list(plan)
    else:
        chosen = list(value_columns(dataset))
    gone = [name for name in chosen if name not in present]
    if gone:
        raise ValueError(
            f"Version {source.version} of {table!r} no longer has the dataset's column(s) {gone}, so its rows "
            f"cannot be stored in the dataset's shards. Choices: add the column(s) back, or convert the table "
            f"again into a new dataset (dataframe_to_mds({table!r}, out, mode='overwrite'))."
        )
    encodings = value_columns(dataset) if dataset is not None else source.plan(chosen)
    return chosen, [name for name in present if name not in chosen], encodings


def _change(
    source: DeltaLakeChanges | SparkDeltaChanges,
    table: str,
    held: int,
    names: list[str],
    encodings: Mapping[str, str],
    change_data_feed: bool | None,
    net: Callable[[Any, Any, Mapping[str, str]], tuple[Any, Any]] | None = None,
) -> tuple[Any, Any, str]:
    """The rows to append for versions ``held + 1 ..`` the target (None when there are none), the count of
    rows the target no longer has, and how they were found (see the module docstring).

    ``net`` turns the rows a reading path adds and takes away into that pair (default: ``source.net``; a
    mirror run asks for the rows taken away themselves)."""
    net = net or source.net
    window: TableWindow | None = None
    missing: HistoryUnavailableError | None = None
    try:
        window = source.window(held)
    except HistoryUnavailableError as err:
        missing = err
    if window is not None and not window.changes_data:
        return None, 0, "no_data_change"
    usable, why_not = _feed_usable(window, missing)
    if change_data_feed and not usable:
        raise ValueError(
            f"change_data_feed=True but the Change Data Feed of {table!r} cannot give versions {held + 1}.."
            f"{source.version}: {why_not}. Choices: change_data_feed=None to read those versions' changed files."
        )
    if usable and change_data_feed is not False:
        try:
            return (*net(*source.feed(held, names), encodings), "change_data_feed")
        except Exception as err:
            if change_data_feed:
                raise _history_error(table, held, source.version, err, held + 1) from err
            logger.warning(
                "incremental_to_mds: the Change Data Feed of %s cannot be read for versions %d..%d (%s); "
                "reading the changed files instead.",
                table,
                held + 1,
                source.version,
                str(err).splitlines()[0] if str(err) else type(err).__name__,
            )
    if window is not None:
        try:
            return (*net(*source.files(window, names), encodings), "snapshot_diff")
        except FilesNotReadable as err:
            logger.info("incremental_to_mds: reading both versions of %s whole: %s", table, err)
        except HistoryUnavailableError as err:
            missing = err
        except Exception as err:
            if not _names_missing_history(err):
                raise
            missing = HistoryUnavailableError(str(err).splitlines()[0], held + 1)
    try:
        return (*net(*source.full(held, names), encodings), "full_snapshot_diff")
    except Exception as err:
        if not isinstance(err, HistoryUnavailableError) and not _names_missing_history(err):
            raise
        cause = missing or err
        version = getattr(cause, "version", held + 1)
        raise _history_error(table, held, source.version, cause, version) from err


def _feed_usable(window: TableWindow | None, missing: HistoryUnavailableError | None) -> tuple[bool, str]:
    """Whether the Change Data Feed gives the window's change, and if not, why."""
    if window is None:
        return False, f"the table's history is incomplete ({missing})"
    if not window.feed_enabled_throughout():
        return False, "delta.enableChangeDataFeed was not true at every one of those versions"
    replaced = window.replacements()
    if replaced:
        return False, f"{', '.join(replaced)} replaced the table"
    changed = window.schema_changes()
    if changed:
        return False, f"{', '.join(changed)} changed the table's schema"
    return True, ""


def _names_missing_history(err: BaseException) -> bool:
    """Whether a reader's error says files or versions of the table are gone (Spark's and delta-rs's words)."""
    text = str(err)
    markers = (
        "FileNotFound",
        "not found",
        "No such file",
        "DELTA_FILE_NOT_FOUND",
        "VersionNotFound",
        "DELTA_VERSIONS_NOT_CONTIGUOUS",
        "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
        "does not exist",
    )
    return isinstance(err, FileNotFoundError) or any(marker in text for marker in markers)


def _history_error(table: str, held: int, target: int, cause: BaseException, version: int) -> IncrementalHistoryError:
    reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return IncrementalHistoryError(
        f"The change of {table!r} from version {held} (what the dataset holds) to version {target} can no longer "
        f"be read: {reason}. Version {version} is the first one missing. Way out: "
        f"incremental_to_mds({table!r}, out, resync=True) appends the rows of version {target} that the dataset "
        f"does not already hold, compared with the dataset's own rows (it reads the whole dataset and table "
        f"once); or rebuild with dataframe_to_mds({table!r}, out, mode='overwrite').",
        version,
    )


def _publish(
    destination: DatasetRoot,
    table: str,
    held: int | None,
    target: int,
    folder: str | None,
    base: commit_log.Snapshot,
    record: dict[str, Any],
) -> None:
    """The commit: the staged shards (if any) on top of ``base`` and the new table version, unless another run
    moved the dataset.

    The commit log's create-only commit decides between concurrent runs: a run that finds a newer commit
    than the one it started from checks which version that commit holds, and fails if it is not ``held``.
    """
    added = []
    if folder is not None:
        staged = read_index(DatasetRoot(destination.child(folder)), missing_ok=True)
        added = [rebase(shard, folder) for shard in staged]

    def still_held(newer: commit_log.Snapshot) -> None:
        now_held = held_version(destination, table, newer)
        if now_held != held:
            left = (
                f" This run's rows stay unpublished in {folder}/ (`streaming.vacuum` removes them)." if folder else ""
            )
            raise RuntimeError(
                f"Another run updated {destination.url} (it now holds version {now_held} of {table!r}, "
                f"this run started from {held}); its rows were not appended twice.{left}"
            )

    still_held(commit_log.read_snapshot(destination))  # a legacy writer may have moved index.json meanwhile
    state = commit_log.commit(
        destination,
        commit_log.APPEND,
        added,
        base=base,
        record=record,
        check=still_held,
        source_versions={table: target},
    )
    commit_log.publish_checkpoint(destination, state)
