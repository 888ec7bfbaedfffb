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
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from streaming.format.index import dumps_index, get_index_basename, parse_index
from streaming.storage.base import Storage, storage_for
from streaming.storage.local import LocalStorage, local_path
from streaming.storage.url import join_url, relative_to

MODES = ("error", "overwrite", "append")
METADATA_BASENAME = "mds_conversion.json"
_FILE_KEYS = ("raw_data", "zip_data", "raw_meta", "zip_meta")


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


class Destination:
    """The dataset root, reached only through the storage layer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.storage: Storage = storage_for(url)

    @property
    def is_local(self) -> bool:
        """Whether the destination is a filesystem path on this machine (tasks can write it directly)."""
        return isinstance(self.storage, LocalStorage)

    def child(self, relative: str) -> str:
        """The URL of a root-relative path (the root itself for ``""``)."""
        return join_url(self.url, relative) if relative else self.url

    def list_relative(self, folder: str = "") -> list[str]:
        """Every object below ``folder`` (relative to the root), as root-relative ``/`` paths."""
        return [relative_to(url, self.url) for url in self.storage.list(self.child(folder))]

    def read_text(self, relative: str) -> str | None:
        """The text of a small object, or None if it does not exist."""
        url = self.child(relative)
        if not self.storage.exists(url):
            return None
        with tempfile.TemporaryDirectory(prefix="mds-spark-") as scratch:
            path = os.path.join(scratch, "object")
            self.storage.get(url, path)
            with open(path, encoding="utf-8") as file:
                return file.read()

    def write_text(self, relative: str, text: str) -> None:
        """Publish a small object atomically."""
        with tempfile.TemporaryDirectory(prefix="mds-spark-") as scratch:
            path = os.path.join(scratch, os.path.basename(relative))
            with open(path, "w", encoding="utf-8") as file:
                file.write(text)
            self.storage.put(path, self.child(relative))

    def delete(self, relatives: Iterable[str]) -> int:
        """Delete objects by root-relative path; return how many were deleted."""
        count = 0
        for relative in relatives:
            self.storage.delete(self.child(relative))
            count += 1
        if self.is_local:
            _remove_empty_folders(local_path(self.url))
        return count


def _remove_empty_folders(root: str) -> None:
    """Remove empty folders below ``root`` (not ``root`` itself), deepest first."""
    for folder, _, _ in sorted(os.walk(root), key=lambda entry: -entry[0].count(os.sep)):
        if folder != root:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


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
    text = destination.read_text(get_index_basename())
    return [] if text is None else parse_index(text, destination.child(get_index_basename()))


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


def rebase_shard(entry: dict[str, Any], folder: str) -> dict[str, Any]:
    """A copy of a shard entry whose file basenames are relative to the dataset root."""
    rebased = dict(entry)
    for key in _FILE_KEYS:
        info = entry.get(key)
        if info is not None:
            rebased[key] = {**info, "basename": f"{folder}/{info['basename']}"}
    return rebased


def first_per_partition(attempts: list[Attempt]) -> list[Attempt]:
    """One attempt per partition (Spark reports exactly one; a duplicate would be ignored)."""
    seen: dict[int, Attempt] = {}
    for attempt in attempts:
        seen.setdefault(attempt.partition, attempt)
    return list(seen.values())


def committed_shards(attempts: list[Attempt]) -> list[dict[str, Any]]:
    """Shard entries of the successful attempts, in partition order, with root-relative basenames."""
    shards = []
    for attempt in sorted(first_per_partition(attempts), key=lambda a: a.partition):
        shards.extend(rebase_shard(entry, attempt.directory) for entry in attempt.shards)
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
        previous = read_index(destination) if mode == "append" else []
        if metadata is not None:
            destination.write_text(METADATA_BASENAME, _metadata_text(destination, mode, metadata))
        destination.write_text(get_index_basename(), dumps_index(previous + added))
        top_level = {get_index_basename(), METADATA_BASENAME}
    delete_leftovers(destination, run, kept | top_level, everything_else=mode == "overwrite")
    return added


def delete_leftovers(destination: Destination, run: str, kept: set[str], *, everything_else: bool) -> int:
    """Delete this run's files outside the ``kept`` attempt folders (and top-level files); with
    ``everything_else``, every other file below the root too. Returns how many files were deleted."""
    listing = destination.list_relative() if everything_else else destination.list_relative(run)
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
