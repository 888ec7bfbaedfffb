"""The driver's side of the commit protocol: check the destination, publish the run, remove the rest.

Readers only follow ``<out>/index.json``. A run commits through the dataset's commit log
(`streaming.format.commit_log`): one create-only commit file names the shards of the attempts the engine
reported as successful (basenames relative to the dataset root) and the conversion metadata, and
``index.json`` is then rewritten from it. Concurrent appends are rebased and all land; an overwrite (or a
``mode="error"`` write) that loses the race fails and removes its own files. Afterwards the run's other
files (failed attempts, lost speculative copies) are deleted, and an overwrite deletes the files of the
dataset it replaced, never files it does not know (a concurrent append's shards in flight).

Attempt folders are nested in the run's folder (``<run>/part-...``), or flat: upstream's one folder per
partition directly below the root (``<run>-part-...``, `streaming.format.runs`), each a dataset of its own.
Without a merged index (``merge_index=False``, `publish_folders`) nothing is committed: the successful attempts'
folders are the dataset, as upstream leaves it, and ``mode="overwrite"`` also removes everything else.
"""

from __future__ import annotations

import contextlib
from typing import Any

from streaming.convert.attempt import Attempt
from streaming.convert.null_plan import widens
from streaming.format import commit_log
from streaming.format.commit_log import Snapshot
from streaming.format.index import INDEX_BASENAME, rebase
from streaming.format.runs import attempt_folder_of, in_run_folder, written_by_run
from streaming.storage.dataset_root import DatasetRoot

MODES = ("error", "overwrite", "append")


def check_destination(destination: DatasetRoot, mode: str) -> Snapshot:
    """Apply ``mode`` before any work; return the committed state the run starts from.

    With ``mode="error"`` only committed content (a commit, an index) or files that are no run's leftovers
    make the destination non-empty: a crashed run's folder does not refuse its retry.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}.")
    state = commit_log.read_snapshot(destination)  # from the driver: bad credentials fail here, not in every task
    if mode == "error":
        existing = [path for path in destination.list_relative() if not in_run_folder(path)]
        if existing or not state.is_empty:
            shown = existing[0] if existing else INDEX_BASENAME
            raise FileExistsError(
                f"Destination {destination.url} is not empty ({len(existing)} files, e.g. "
                f"{shown!r}). Choices: mode='overwrite' to replace it, mode='append' to "
                f"add to the dataset there, or another path."
            )
    return state


def check_append_columns(
    existing: list[dict[str, Any]], columns: dict[str, str], where: str, *, widening: bool = False
) -> None:
    """Refuse to append samples whose columns differ from the dataset's (with ``widening``, unless they only
    widen them: `null_plan.widens`)."""
    names = sorted(columns)
    encodings = [columns[name] for name in names]
    for shard in existing:
        if shard.get("format") != "mds":
            continue
        if shard.get("column_names") == names and shard.get("column_encodings") == encodings:
            continue
        have = dict(zip(shard.get("column_names", []), shard.get("column_encodings", [])))
        if not (widening and widens(have, columns)):
            raise ValueError(
                f"Cannot append to {where}: its shards have columns {have} but this DataFrame would "
                f"write {dict(zip(names, encodings))}. Choices: pass matching `columns`, "
                f"mode='overwrite', or another path."
            )


def first_per_partition(attempts: list[Attempt]) -> list[Attempt]:
    """One attempt per partition (Spark reports exactly one; a duplicate would be ignored)."""
    seen: dict[int, Attempt] = {}
    # Keeping the first makes a duplicate report harmless: the other copy's folder is deleted as a leftover.
    for attempt in attempts:
        seen.setdefault(attempt.partition, attempt)
    return list(seen.values())


def committed_shards(attempts: list[Attempt]) -> list[dict[str, Any]]:
    """Shard entries of the successful attempts, in partition order, with root-relative basenames."""
    shards: list[dict[str, Any]] = []
    for attempt in sorted(first_per_partition(attempts), key=lambda a: a.partition):
        shards.extend(rebase(entry, attempt.directory) for entry in attempt.shards)
    return shards


def publish(
    destination: DatasetRoot,
    run: str,
    attempts: list[Attempt],
    mode: str,
    *,
    metadata: dict[str, Any] | None = None,
    base: Snapshot | None = None,
    flat: bool = False,
    widening: bool = False,
) -> list[dict[str, Any]]:
    """Commit a run on top of ``base`` (the state `check_destination` returned; read now if None), publish
    the index and metadata, then delete what is not part of the dataset. ``widening``: an append may widen the
    dataset's columns (`check_append_columns`). Returns the shard entries it added."""
    kept = {attempt.directory for attempt in first_per_partition(attempts) if attempt.directory}
    added = committed_shards(attempts)
    start = commit_log.read_snapshot(destination) if base is None else base
    operation = commit_log.APPEND if mode == "append" else commit_log.OVERWRITE
    try:
        state = commit_log.commit(
            destination,
            operation,
            added,
            base=start,
            record=metadata,
            check=lambda newer: _check_rebase(newer, added, widening),
        )
    except BaseException:
        discard_run(destination, run, flat=flat)
        raise
    commit_log.publish_checkpoint(destination, state)
    delete_leftovers(destination, run, kept, flat=flat, everything_else=False)
    if operation == commit_log.OVERWRITE:
        destination.delete(commit_log.removed_files(start, state))
    return added


def publish_folders(destination: DatasetRoot, run: str, attempts: list[Attempt], mode: str) -> None:
    """Without a merged index: keep the successful attempts' flat folders, delete the run's others (and, for an
    overwrite, everything else below the root: the previous dataset, its index, its commit log)."""
    kept = {attempt.directory for attempt in first_per_partition(attempts) if attempt.directory}
    delete_leftovers(destination, run, kept, flat=True, everything_else=mode == "overwrite")


def _check_rebase(newer: Snapshot, added: list[dict[str, Any]], widening: bool) -> None:
    """Before an append is put on top of a newer commit: refuse it if that commit changed the columns."""
    mds = next((entry for entry in added if entry.get("format") == "mds"), None)
    if mds is not None:
        columns = dict(zip(mds.get("column_names", []), mds.get("column_encodings", [])))
        check_append_columns(
            newer.shards, columns, "the dataset as another writer just committed it", widening=widening
        )


def delete_leftovers(destination: DatasetRoot, run: str, kept: set[str], *, flat: bool, everything_else: bool) -> int:
    """Delete this run's files outside the ``kept`` attempt folders; with ``everything_else``, every other file
    below the root too. Returns how many files were deleted."""
    listing = destination.list_relative() if everything_else or flat else destination.list_relative(run)
    doomed = [
        relative
        for relative in listing
        if attempt_folder_of(relative, flat) not in kept and (everything_else or written_by_run(relative, run, flat))
    ]
    return destination.delete(doomed)


def discard_run(destination: DatasetRoot, run: str, *, flat: bool = False) -> None:
    """After a failed job: remove whatever the run wrote (the published dataset is untouched)."""
    with contextlib.suppress(Exception):
        listing = destination.list_relative() if flat else destination.list_relative(run)
        destination.delete([relative for relative in listing if written_by_run(relative, run, flat)])
