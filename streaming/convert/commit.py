"""The driver's side of the commit protocol: check the destination, commit the run, remove the rest.

Readers only follow ``<out>/index.json``. A run commits through the dataset's commit log
(`streaming.format.commit_log`): one create-only commit file names the shards of the attempts the engine
reported as successful (basenames relative to the dataset root) and the conversion metadata, and
``index.json`` is then rewritten from it. Concurrent appends are rebased and all land; an overwrite (or a
``mode="error"`` write) that loses the race fails and removes its own files. Afterwards the run's other
files (failed attempts, lost speculative copies) are deleted, and an overwrite deletes the files of the
dataset it replaced, never files it does not know (a concurrent append's shards in flight).
"""

from __future__ import annotations

import contextlib
from typing import Any

from streaming.convert.attempt import Attempt
from streaming.convert.null_plan import widens
from streaming.convert.runs import in_run_folder
from streaming.format import commit_log
from streaming.format.commit_log import Snapshot
from streaming.format.index import INDEX_BASENAME, rebase
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
    merge_index: bool = True,
    metadata: dict[str, Any] | None = None,
    base: Snapshot | None = None,
    widening: bool = False,
) -> list[dict[str, Any]]:
    """Commit a run on top of ``base`` (the state `check_destination` returned; read now if None), publish
    the index and metadata, then delete what is not part of the dataset.

    Without ``merge_index`` nothing is committed: only the attempts' own indexes describe the data, and
    ``overwrite`` also removes a previous merged index. ``widening``: an append may widen the dataset's columns
    (`check_append_columns`). Returns the shard entries this run added.
    """
    kept = {attempt.directory for attempt in first_per_partition(attempts) if attempt.directory}
    added = committed_shards(attempts)
    if not merge_index:
        delete_leftovers(destination, run, kept, everything_else=mode == "overwrite")
        return added
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
        discard_run(destination, run)
        raise
    commit_log.publish_checkpoint(destination, state)
    delete_leftovers(destination, run, kept, everything_else=False)
    if operation == commit_log.OVERWRITE:
        destination.delete(commit_log.removed_files(start, state))
    return added


def _check_rebase(newer: Snapshot, added: list[dict[str, Any]], widening: bool) -> None:
    """Before an append is put on top of a newer commit: refuse it if that commit changed the columns."""
    mds = next((entry for entry in added if entry.get("format") == "mds"), None)
    if mds is not None:
        columns = dict(zip(mds.get("column_names", []), mds.get("column_encodings", [])))
        check_append_columns(
            newer.shards, columns, "the dataset as another writer just committed it", widening=widening
        )


def delete_leftovers(destination: DatasetRoot, run: str, kept: set[str], *, everything_else: bool) -> int:
    """Delete this run's files outside the ``kept`` attempt folders (and top-level files); with
    ``everything_else``, every other file below the root too. Returns how many files were deleted."""
    listing = destination.list_relative() if everything_else else destination.list_relative(run)
    # A file is kept when it lies in a committed attempt's folder; failed and speculative attempts are siblings.
    doomed = [relative for relative in listing if relative not in kept and _attempt_of(relative) not in kept]
    return destination.delete(doomed)


def _attempt_of(relative: str) -> str:
    """The ``<run>/<attempt>`` folder a root-relative path lies in (attempt folders are two levels deep)."""
    return "/".join(relative.split("/", 2)[:2])


def discard_run(destination: DatasetRoot, run: str) -> None:
    """After a failed job: remove whatever the run wrote (the published dataset is untouched)."""
    with contextlib.suppress(Exception):
        destination.delete(destination.list_relative(run))
