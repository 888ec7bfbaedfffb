"""The commit log of a dataset: numbered commit files created exclusively, with ``index.json`` as checkpoint.

Concurrent writers of one dataset (two scheduled jobs, an overwrite racing an append) agree through
``<root>/_mds_log/<20-digit N>.json``: commit N is created with the store's create-only write
(`Storage.put_if_absent`), so of two writers that both read version N-1 exactly one creates N. A commit
records the operation (``append`` or ``overwrite``), the files it added and removed, the complete shard list
after it and the conversion metadata (``mds_conversion.json``'s content), so metadata and shards are
published in one atomic step. The newest commit is the dataset's state.

Readers keep reading ``index.json`` only (byte for byte the index MosaicML Streaming writes), which
`publish_checkpoint` rewrites from the newest commit after every commit, convergently: after writing it, it
looks for a newer commit and, if one appeared meanwhile, writes that one's state, until none is newer. A
crash between a commit and its checkpoint leaves a stale ``index.json`` that the next writer repairs.

An append that loses the race re-reads the newest state, puts its shards on top of it and tries N+1 (so
concurrent appends all land); an overwrite that loses fails with `ConcurrentCommitError`. A dataset without
a log (written by MosaicML Streaming or an older version) is version 0: its ``index.json`` and metadata.

The log folder also holds an empty ``index.json`` (`LOG_MARKER`), written with the first commit: tools that
walk a dataset root treating every folder as a dataset of its own, as upstream's layout lets them (its tests,
user code building a `Stream` per partition folder, `merge_index` of a root), read the log folder as an empty
dataset rather than as a broken one.
"""

from __future__ import annotations

import json
import posixpath
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streaming.format.commit_checks import check_conversion_record, load_commit, load_json
from streaming.format.index import INDEX_BASENAME, METADATA_BASENAME, dumps_index, parse_index, shard_files
from streaming.storage.dataset_root import DatasetRoot

LOG_FOLDER = "_mds_log"
#: The empty index inside the log folder (see the module docstring).
LOG_MARKER = f"{LOG_FOLDER}/{INDEX_BASENAME}"

APPEND = "append"
OVERWRITE = "overwrite"
OPERATIONS = (APPEND, OVERWRITE)
#: How often an append re-reads and retries after losing the race for a version number.
MAX_COMMIT_ATTEMPTS = 64
#: How long a reader waits for a commit file that is still being written (where the store claims a name
#: before its bytes arrive: ``O_EXCL`` on a FUSE mount without ``link()``).
TORN_COMMIT_WAIT = 5.0
_COMMIT_NAME = re.compile(r"^(\d{20})\.json$")


class ConcurrentCommitError(RuntimeError):
    """Another writer committed to the dataset first, and this operation cannot be put on top of it."""


@dataclass(frozen=True)
class Snapshot:
    """A dataset's committed state: its version (0 without a log), shard entries and conversion metadata."""

    version: int
    shards: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    logged: bool = False

    @property
    def is_empty(self) -> bool:
        """Whether nothing was ever committed here (no commit, no index)."""
        return self.version == 0 and not self.logged and not self.shards and self.metadata is None


def commit_path(version: int) -> str:
    """The root-relative path of commit ``version``."""
    return f"{LOG_FOLDER}/{version:020d}.json"


def commit_versions(destination: DatasetRoot) -> list[int]:
    """The versions of every commit file, ascending."""
    names = (posixpath.basename(path) for path in destination.list_relative(LOG_FOLDER))
    return sorted(int(match.group(1)) for name in names if (match := _COMMIT_NAME.match(name)))


def read_snapshot(destination: DatasetRoot) -> Snapshot:
    """The newest committed state; for a dataset without a log, its ``index.json`` (version 0)."""
    versions = commit_versions(destination)
    if versions:
        return _read_commit(destination, versions[-1])
    text = destination.read_text(INDEX_BASENAME)
    shards = [] if text is None else parse_index(text, destination.child(INDEX_BASENAME))
    return Snapshot(0, shards, _legacy_metadata(destination), logged=False) if text is not None else Snapshot(0)


def commit(
    destination: DatasetRoot,
    operation: str,
    added: list[dict[str, Any]],
    *,
    base: Snapshot,
    record: dict[str, Any] | None = None,
    check: Callable[[Snapshot], None] | None = None,
) -> Snapshot:
    """Commit ``added`` shards on top of ``base`` (the state the writer read before it wrote them).

    ``append`` keeps the state's shards and adds these; ``overwrite`` replaces them. ``record`` (this run's
    conversion record) becomes the metadata's ``latest`` and is appended to its ``runs`` (an overwrite
    starts them afresh). When an append finds a newer commit than ``base`` it calls ``check`` on that state
    (e.g. to refuse other columns) and retries on top of it; an overwrite raises `ConcurrentCommitError`.
    Returns the committed state; `publish_checkpoint` then makes it visible to readers.
    """
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {OPERATIONS}, got {operation!r}.")
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        state = _next_state(base, operation, added, record)
        body = {
            "version": state.version,
            "operation": operation,
            "base_version": base.version,
            "added": _file_names(added),
            "removed": _file_names(base.shards) if operation == OVERWRITE else [],
            "shards": state.shards,
            "metadata": state.metadata,
            "committed_at": time.time(),
        }
        if destination.create_text(commit_path(state.version), json.dumps(body, sort_keys=True)):
            if state.version == 1:
                destination.write_text(LOG_MARKER, dumps_index([]))
            return state
        newer = read_snapshot(destination)
        if operation == OVERWRITE:
            raise ConcurrentCommitError(
                f"Another writer committed version {newer.version} of {destination.url} while this write was "
                f"running (it started from version {base.version}, and a write that replaces the dataset or "
                f"needs it empty is not put on top of another's); it was not applied and its files are "
                f"removed. Run it again against the dataset as it is now."
            )
        if check is not None:
            check(newer)
        base = newer
        time.sleep(random.uniform(0, 0.05 * (attempt + 1)))  # spread out writers that keep colliding
    raise ConcurrentCommitError(
        f"Could not commit to {destination.url}: {MAX_COMMIT_ATTEMPTS} other commits won the race in a row."
    )


def publish_checkpoint(destination: DatasetRoot, state: Snapshot) -> Snapshot:
    """Write ``state`` as ``index.json`` (and ``mds_conversion.json``), then converge on the newest commit.

    Each writer rewrites the checkpoint after its own commit and then re-reads the newest commit; if a newer
    one exists it writes that one instead. So whichever writer finishes last leaves the newest state, and
    a checkpoint never goes back to an older version for good. Returns the state the checkpoint holds.
    """
    while True:
        if state.metadata is not None:
            destination.write_text(METADATA_BASENAME, json.dumps(state.metadata, indent=2, sort_keys=True))
        destination.write_text(INDEX_BASENAME, dumps_index(state.shards))
        newest = commit_versions(destination)
        if not newest or newest[-1] <= state.version:
            return state
        state = _read_commit(destination, newest[-1])


def referenced_files(destination: DatasetRoot, since: float) -> set[str]:
    """Root-relative paths vacuum must keep: every commit file, the files the newest commit names, and
    those of commits made after ``since`` (POSIX seconds; Delta keeps the versions inside the retention)."""
    versions = commit_versions(destination)
    keep = {commit_path(version) for version in versions}
    for version in reversed(versions):
        body = _read_body(destination, version)
        keep |= set(_file_names(body["shards"]))
        if float(body.get("committed_at", 0)) < since:
            break
    return keep


def removed_files(before: Snapshot, after: Snapshot) -> list[str]:
    """Files ``before`` names that ``after`` does not: what an overwrite may delete once it is committed.

    Also the attempt folders' own ``index.json`` files of the removed shards (never the root index).
    """
    kept = set(_file_names(after.shards))
    doomed = [name for name in _file_names(before.shards) if name not in kept]
    folders = {posixpath.dirname(name) for name in doomed} - {""}
    kept_folders = {posixpath.dirname(name) for name in kept}
    return doomed + sorted(f"{folder}/{INDEX_BASENAME}" for folder in folders - kept_folders)


def _next_state(base: Snapshot, operation: str, added: list[dict[str, Any]], record: dict[str, Any] | None) -> Snapshot:
    shards = (base.shards if operation == APPEND else []) + added
    metadata = base.metadata if operation == APPEND else None
    if record is not None:
        runs = list((metadata or {}).get("runs", [])) if operation == APPEND else []
        stamped = {**record, "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        metadata = {"runs": [*runs, stamped], "latest": stamped}
    return Snapshot(base.version + 1, shards, metadata, logged=True)


def _file_names(shards: list[dict[str, Any]]) -> list[str]:
    return [info["basename"] for entry in shards for _, info in shard_files(entry)]


def _read_commit(destination: DatasetRoot, version: int) -> Snapshot:
    body = _read_body(destination, version)
    return Snapshot(version, list(body["shards"]), body.get("metadata"), logged=True)


def _read_body(destination: DatasetRoot, version: int) -> dict[str, Any]:
    relative = commit_path(version)
    deadline = time.monotonic() + TORN_COMMIT_WAIT
    while True:
        text = destination.read_text(relative)
        try:
            return load_commit(text or "", version, destination.child(relative))
        except json.JSONDecodeError:
            if time.monotonic() > deadline:
                raise ValueError(
                    f"Commit file {destination.child(relative)} is empty or not JSON after "
                    f"{TORN_COMMIT_WAIT:.0f} s; a writer crashed while creating it. Remove it only if no "
                    f"writer is running."
                ) from None
            time.sleep(0.05)


def _legacy_metadata(destination: DatasetRoot) -> dict[str, Any] | None:
    text = destination.read_text(METADATA_BASENAME)
    try:
        metadata = load_json(text, destination.child(METADATA_BASENAME)) if text else None
    except json.JSONDecodeError:
        return None
    return (
        check_conversion_record(metadata, destination.child(METADATA_BASENAME)) if isinstance(metadata, dict) else None
    )
