"""Applying a change by appending: the rows a version has beyond the version the dataset holds become new shards.

The default mode of the job (`streaming.incremental.job` states its semantics): nothing is removed. A run reads
the change (`streaming.incremental.change`), converts the rows it adds into its own increment folder, and commits
those shards with the table version (`streaming.incremental.commit`), also when no row was added.
"""

from __future__ import annotations

import json
import logging

from streaming.convert.key_map import mirror_record
from streaming.convert.null_plan import WIDENING_POLICY
from streaming.convert.row_identity import dataset_identities
from streaming.format import commit_log
from streaming.format.index import read_index, rebase
from streaming.format.runs import new_increment_folder, new_run_id
from streaming.incremental.change import Change, read_change
from streaming.incremental.commit import commit_run
from streaming.incremental.dataset_state import held_columns, held_version
from streaming.incremental.options import RunOptions
from streaming.incremental.reader import ReaderChoice
from streaming.incremental.result import RECORD_BASENAME, IncrementResult, run_record
from streaming.storage.dataset_root import DatasetRoot

logger = logging.getLogger(__name__)


def append_to_mds(choice: ReaderChoice, table: str, destination: DatasetRoot, options: RunOptions) -> IncrementResult:
    """One append run (``options`` are ``incremental_to_mds``'s, checked)."""
    choice.check_destination(destination.url, options.executor_env)
    source = choice.open(table, options.version)
    committed = commit_log.read_snapshot(destination)
    if mirror_record(committed) is not None:
        raise ValueError(
            f"{destination.url} is a mirror of {table!r} (made with mode='mirror'): an append-only run would "
            f"leave its deleted rows out of step with its key map. Choices: mode='mirror', or another `out`."
        )
    held = held_version(destination, table, committed)
    target = source.version
    if held is not None and target < held:
        raise ValueError(
            f"The dataset at {destination.url} already holds version {held} of {table!r}; "
            f"version {target} is older. Choices: version >= {held}, or another `out`."
        )
    if held == target and not options.resync:
        logger.info("incremental_to_mds: %s already holds version %d of %s", destination.url, target, table)
        return IncrementResult(destination.url, table, held, target, "up_to_date", 0, 0, 0)
    if options.resync and held is None:
        raise ValueError(f"resync=True needs an existing dataset at {destination.url}; the first run converts it.")

    existing = committed.shards
    columns = options.columns
    names, ignored, encodings = held_columns(source, existing, columns, table)
    if held is None:
        change = Change(source.version_rows(), "snapshot")
    elif options.resync:
        stored = dataset_identities(destination, existing, encodings)
        change = Change(source.subtract(stored, names, encodings), "resync")
    else:
        change = read_change(source, table, held, names, encodings, options.change_data_feed)
    folder, staged_samples, staged_shards, run = None, 0, 0, new_run_id()
    if change.added is not None:
        folder = new_increment_folder(target)
        staged = source.write(
            change.added,
            destination.child(folder),
            columns=columns if columns is not None or held is None else names,
            mode="overwrite",
            executor_env=options.executor_env,
            nulls=WIDENING_POLICY if options.nulls == "mask" else options.nulls,
            join_shards=existing,
            **options.conversion(),
        )
        staged_samples, staged_shards, run = staged.samples, staged.shards, staged.run
    unapplied = change.removed_count
    result = IncrementResult(
        destination.url, table, held, target, change.method, staged_samples, staged_shards, unapplied, ignored
    )
    record = run_record(result, run, source.reader)
    if folder is not None:
        destination.write_text(f"{folder}/{RECORD_BASENAME}", json.dumps(record, indent=2, sort_keys=True))
    published = folder if staged_shards else None
    added = []
    if published is not None:
        staged_index = read_index(DatasetRoot(destination.child(published)), missing_ok=True)
        added = [rebase(shard, published) for shard in staged_index]
    left = f" This run's rows stay unpublished in {published}/ (`streaming.vacuum` removes them)." if published else ""
    commit_run(
        destination,
        table,
        held,
        target,
        lambda state: held_version(destination, table, state),
        committed,
        commit_log.APPEND,
        added,
        record,
        lost=f"its rows were not appended twice.{left}",
        reread=True,  # a legacy writer may have moved index.json meanwhile
    )
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
        change.method,
    )
    return result
