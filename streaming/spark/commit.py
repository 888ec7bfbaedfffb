"""The driver's side of the commit protocol: check the destination, publish the index, remove the rest.

Readers only follow ``<out>/index.json``, so publishing it is the commit: it is written last, in one
atomic step (a rename on a filesystem, a single PUT on an object store), and names only shards of the
attempts Spark reported as successful, with basenames relative to the dataset root. Everything else the
run wrote (failed attempts, lost speculative copies) is deleted afterwards; ``mode="overwrite"`` deletes
the previous dataset's files only once the new index is in place.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from streaming.format.index import INDEX_BASENAME, METADATA_BASENAME, parse_index, publish_index, rebase
from streaming.storage.destination import Destination

MODES = ("error", "overwrite", "append")


@dataclass(frozen=True)
class Attempt:
    """One successful task attempt as reported back to the driver."""

    partition: int
    attempt: int
    directory: str
    shards: list[dict[str, Any]]
    samples: int
    bytes: int
    peak_local_bytes: int


def check_destination(destination: Destination, mode: str) -> list[dict[str, Any]]:
    """Apply ``mode`` before any work; return the shard entries already published (kept by ``append``)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}.")
    if mode == "error":
        existing = destination.list_relative()
        if existing:
            raise FileExistsError(
                f"Destination {destination.url} is not empty ({len(existing)} files, e.g. "
                f"{existing[0]!r}). Choices: mode='overwrite' to replace it, mode='append' to "
                f"add to the dataset there, or another path."
            )
    published = read_index(destination)  # reached from the driver: bad credentials fail here, not in every task
    return published if mode == "append" else []


def read_index(destination: Destination) -> list[dict[str, Any]]:
    """The shard entries of the published index, or ``[]`` when there is none."""
    text = destination.read_text(INDEX_BASENAME)
    return [] if text is None else parse_index(text, destination.child(INDEX_BASENAME))


def check_append_columns(existing: list[dict[str, Any]], columns: dict[str, str], where: str) -> None:
    """Refuse to append samples whose columns differ from the dataset's."""
    names = sorted(columns)
    encodings = [columns[name] for name in names]
    for shard in existing:
        if shard.get("format") != "mds":
            continue
        if shard.get("column_names") != names or shard.get("column_encodings") != encodings:
            have = dict(zip(shard.get("column_names", []), shard.get("column_encodings", [])))
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
    destination: Destination,
    run: str,
    attempts: list[Attempt],
    mode: str,
    *,
    merge_index: bool = True,
    metadata: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Commit a run: write the metadata and the merged index (last), then delete what is not part of it.

    Without ``merge_index`` only the attempts' own indexes describe the data, and ``overwrite`` also
    removes a previous merged index. Returns the shard entries this run added.
    """
    kept = {attempt.directory for attempt in first_per_partition(attempts) if attempt.directory}
    added = committed_shards(attempts)
    top_level: set[str] = set()
    if merge_index:
        # Re-read at commit time, not at check time: the append goes on top of whatever is published now.
        previous = read_index(destination) if mode == "append" else []
        if metadata is not None:
            destination.write_text(METADATA_BASENAME, _metadata_text(destination, mode, metadata))
        # The commit point. Before it readers see the old dataset whole; after it, the new one.
        publish_index(destination.url, previous + added)
        top_level = {INDEX_BASENAME, METADATA_BASENAME}
    # Only after the publish: a crash before it leaves the old dataset readable, and the run's folder is
    # garbage for the next overwrite or for `vacuum`.
    delete_leftovers(destination, run, kept | top_level, everything_else=mode == "overwrite")
    return added


def delete_leftovers(destination: Destination, run: str, kept: set[str], *, everything_else: bool) -> int:
    """Delete this run's files outside the ``kept`` attempt folders (and top-level files); with
    ``everything_else``, every other file below the root too. Returns how many files were deleted."""
    listing = destination.list_relative() if everything_else else destination.list_relative(run)
    # A file is kept when it lies in a committed attempt's folder; failed and speculative attempts are siblings.
    doomed = [relative for relative in listing if relative not in kept and _attempt_of(relative) not in kept]
    return destination.delete(doomed)


def _attempt_of(relative: str) -> str:
    """The ``<run>/<attempt>`` folder a root-relative path lies in (attempt folders are two levels deep)."""
    return "/".join(relative.split("/", 2)[:2])


def discard_run(destination: Destination, run: str) -> None:
    """After a failed job: remove whatever the run wrote (the published dataset is untouched)."""
    with contextlib.suppress(Exception):
        destination.delete(destination.list_relative(run))


def _metadata_text(destination: Destination, mode: str, record: dict[str, Any]) -> str:
    """The metadata file's new text: this run's record after those of the runs still in the dataset."""
    runs: list[dict[str, Any]] = []
    if mode == "append":
        with contextlib.suppress(ValueError, TypeError):
            runs = list(json.loads(destination.read_text(METADATA_BASENAME) or "{}").get("runs", []))
    record = {**record, "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return json.dumps({"runs": [*runs, record], "latest": record}, indent=2, sort_keys=True)
