"""The commit log of a dataset: numbered commit files created exclusively, checkpoints of the state, ``index.json``.

Concurrent writers of one dataset (two scheduled jobs, an overwrite racing an append) agree through
``<root>/_mds_log/<20-digit N>.json``: commit N is created with the store's create-only write
(`DatasetRoot.create_text`: ``link`` on a filesystem, a conditional PUT on object stores, the Files API's
no-overwrite upload for a Unity Catalog volume even where it is mounted), so of two writers that both read
version N-1 exactly one creates N, and the file appears with its whole body. A commit records what changed,
as Delta's ``_delta_log`` does: the operation (``append``, ``overwrite`` or ``replace``), the shard entries it
added, the files it removed (an overwrite: every file; a ``replace``: the shards a mirror run rewrote, copy on
write), this run's conversion record, the source versions it brings the dataset to (``source_versions``: e.g.
the Delta table version an incremental run converted) and, for a mirror run, its ``audit`` (the keys it
removed or replaced). A run record's ``files`` names files beside the shards that its state needs (a mirror
dataset's key map), which ``vacuum`` keeps while that record is the newest.

Every `CHECKPOINT_INTERVAL` commits the committing writer also writes a checkpoint of the whole state,
``_mds_log/<N>.checkpoint.json.gz`` (shards, metadata, source versions), so a reader needs only the newest
checkpoint and the commits after it, and `referenced_files` lets ``vacuum`` remove older log files once they
are past the retention: the log stays bounded however long a job runs. The state's metadata keeps the
newest `RUNS_KEPT` run records (each commit file keeps its own).

Readers keep reading ``index.json`` only (byte for byte the index MosaicML Streaming writes), which
`publish_checkpoint` rewrites from the newest state after every commit, convergently: after writing it, it
looks for a newer commit and, if one appeared meanwhile, writes that state, until none is newer. A crash
between a commit and its checkpoint leaves a stale ``index.json`` that the next writer repairs.

An append that loses the race re-reads the newest state, puts its shards on top of it and tries N+1 (so
concurrent appends all land); an overwrite that loses fails with `ConcurrentCommitError`. A commit file that
is still empty or not JSON `TORN_COMMIT_WAIT` seconds after it was last modified was left by a writer killed
while creating it (only a store without an atomic create-with-body can leave one): it is void, a version
number that changed nothing, and never blocks later writers. A dataset without a log (written by MosaicML
Streaming or an older version) is version 0: its ``index.json`` and metadata. Logs written before checkpoints
existed (every commit holding the whole state) are read as they are.

The log folder also holds an empty ``index.json`` (`LOG_MARKER`), written with the first commit: tools that
walk a dataset root treating every folder as a dataset of its own, as upstream's layout lets them (its tests,
user code building a `Stream` per partition folder, `merge_index` of a root), read the log folder as an empty
dataset rather than as a broken one.
"""

from __future__ import annotations

import gzip
import json
import logging
import posixpath
import random
import re
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.format.commit_checks import check_checkpoint, check_conversion_record, load_commit, load_json
from streaming.format.compression import decompress
from streaming.format.index import INDEX_BASENAME, METADATA_BASENAME, dumps_index, parse_index, shard_files
from streaming.storage.dataset_root import DatasetRoot

logger = logging.getLogger(__name__)

LOG_FOLDER = "_mds_log"
#: The empty index inside the log folder (see the module docstring).
LOG_MARKER = f"{LOG_FOLDER}/{INDEX_BASENAME}"

APPEND = "append"
OVERWRITE = "overwrite"
#: Keep the state's shards but those whose files ``remove`` names, and add ``add`` at the end (copy on write).
REPLACE = "replace"
OPERATIONS = (APPEND, OVERWRITE, REPLACE)
#: The format of the commit files and checkpoints this version writes (earlier commits held the whole state).
LOG_FORMAT = 2
#: A checkpoint of the state is written after every commit whose version is a multiple of this (Delta's default).
CHECKPOINT_INTERVAL = 10
#: How many run records the state's metadata (``mds_conversion.json``) keeps; every commit file keeps its own.
RUNS_KEPT = 100
#: How often an append re-reads and retries after losing the race for a version number.
MAX_COMMIT_ATTEMPTS = 64
#: How long after its last modification a commit file that is empty or not JSON is taken as left by a killed
#: writer (void). Only a store without an atomic create-with-body (``O_EXCL`` on a filesystem without ``link``)
#: can show such a file at all.
TORN_COMMIT_WAIT = 10.0
#: What a checkpoint may hold beyond what the dataset's published files and later commits account for (the
#: JSON of a few shard entries and run records): its bound is `checkpoint_limit`.
CHECKPOINT_SLACK = 1 << 20
#: How many bytes of checkpoint one byte of a later commit may account for: a replace commit names a removed
#: shard by its file name (some 30 bytes of JSON) where the checkpoint holds its whole entry (up to a few KiB).
COMMIT_FACTOR = 64
_COMMIT_NAME = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_NAME = re.compile(r"^(\d{20})\.checkpoint\.json\.gz$")


class ConcurrentCommitError(RuntimeError):
    """Another writer committed to the dataset first, and this operation cannot be put on top of it."""


class LogDamagedError(RuntimeError):
    """The commit log misses a commit the state needs (removed by hand, or by a vacuum that did not know it)."""


@dataclass(frozen=True)
class Snapshot:
    """A dataset's committed state.

    Attributes:
        version: the newest commit (0 without a log).
        shards: the index entries of the dataset's shards.
        metadata: the conversion metadata (``mds_conversion.json``: ``latest`` and ``runs``), or None.
        logged: whether the state comes from a commit log.
        source_versions: what the commits recorded they brought the dataset up to, by source (for example
            ``{"main.default.events": 42}`` after an incremental run converted version 42 of that table).
    """

    version: int
    shards: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    logged: bool = False
    source_versions: dict[str, int] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        """Whether nothing was ever committed here (no commit, no index)."""
        return self.version == 0 and not self.logged and not self.shards and self.metadata is None


def commit_path(version: int) -> str:
    """The root-relative path of commit ``version``."""
    return f"{LOG_FOLDER}/{version:020d}.json"


def checkpoint_path(version: int) -> str:
    """The root-relative path of the checkpoint of the state at ``version``."""
    return f"{LOG_FOLDER}/{version:020d}.checkpoint.json.gz"


def commit_versions(destination: DatasetRoot) -> list[int]:
    """The versions of every commit file, ascending."""
    return _log_listing(destination)[0]


def read_snapshot(destination: DatasetRoot) -> Snapshot:
    """The newest committed state; for a dataset without a log, its ``index.json`` (version 0)."""
    commits, checkpoints = _log_listing(destination)
    if not commits and not checkpoints:
        text = destination.read_text(INDEX_BASENAME)
        if text is None:
            return Snapshot(0)
        return Snapshot(0, parse_index(text, destination.child(INDEX_BASENAME)), _legacy_metadata(destination))
    return _state_at(destination, commits, checkpoints)[0]


def commit(
    destination: DatasetRoot,
    operation: str,
    added: list[dict[str, Any]],
    *,
    base: Snapshot,
    record: dict[str, Any] | None = None,
    check: Callable[[Snapshot], None] | None = None,
    source_versions: Mapping[str, int] | None = None,
    removed: list[str] | None = None,
    audit: dict[str, Any] | None = None,
) -> Snapshot:
    """Commit ``added`` shards on top of ``base`` (the state the writer read before it wrote them).

    ``append`` keeps the state's shards and adds these; ``overwrite`` replaces them; ``replace`` drops the
    shards whose files ``removed`` names and adds these at the end (``audit`` goes into the commit file only).
    ``record`` (this run's conversion record) becomes the metadata's ``latest`` and joins its ``runs`` (an
    overwrite starts them afresh). ``source_versions`` are recorded in the state (an overwrite drops the
    earlier ones). When an append finds a newer commit than ``base`` it calls ``check`` on that state (e.g. to
    refuse other columns, or a source version another writer moved) and retries on top of it; an overwrite
    raises `ConcurrentCommitError`, and so does a replace once ``check`` passed (its removals were chosen on
    ``base``). Returns the committed state; `publish_checkpoint` then makes it visible to readers.
    """
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {OPERATIONS}, got {operation!r}.")
    stamped = None if record is None else {**record, "committed_at": _utc_now()}
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        body = {
            "log_format": LOG_FORMAT,
            "version": base.version + 1,
            "operation": operation,
            "base_version": base.version,
            "add": added,
            "remove": _file_names(base.shards) if operation == OVERWRITE else list(removed or ()),
            "record": stamped,
            "source_versions": dict(source_versions or {}),
            "committed_at": time.time(),
            **({"audit": audit} if audit is not None else {}),
        }
        state = _apply(base, body)
        if destination.create_text(commit_path(state.version), json.dumps(body, sort_keys=True)):
            if state.version == 1:
                destination.write_text(LOG_MARKER, dumps_index([]))
            if state.version % CHECKPOINT_INTERVAL == 0:
                write_log_checkpoint(destination, state)
            return state
        newer = read_snapshot(destination)
        if operation == REPLACE and check is not None:
            check(newer)  # names what moved the dataset, when the caller can tell
        if operation in (OVERWRITE, REPLACE):
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


def write_log_checkpoint(destination: DatasetRoot, state: Snapshot) -> None:
    """Write the checkpoint of ``state`` (any writer may, and it may be written twice: same content)."""
    body = {
        "log_format": LOG_FORMAT,
        "version": state.version,
        "shards": state.shards,
        "metadata": state.metadata,
        "source_versions": state.source_versions,
    }
    data = gzip.compress(json.dumps(body, sort_keys=True).encode("utf-8"), compresslevel=6, mtime=0)
    destination.write_bytes(checkpoint_path(state.version), data)


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
        state = read_snapshot(destination)


def referenced_files(destination: DatasetRoot, since: float) -> set[str]:
    """Root-relative paths vacuum must keep: the log files a reader needs (the newest checkpoint and every
    commit after it), the files of the newest state (its shards and the ``files`` of its newest run record), and
    the files that commits made after ``since`` (POSIX
    seconds) removed, so a reader of an older ``index.json`` inside the retention still finds them (Delta keeps
    the versions inside the retention). Older log files are left to vacuum's age check."""
    commits, checkpoints = _log_listing(destination)
    state, base, bodies = _state_at(destination, commits, checkpoints)
    keep = {commit_path(version) for version in commits if version > base}
    if base in checkpoints:
        keep.add(checkpoint_path(base))
    elif base in commits:
        keep.add(commit_path(base))  # a commit that holds the whole state (an older log's format)
    keep |= set(_file_names(state.shards))
    keep |= set(((state.metadata or {}).get("latest") or {}).get("files") or ())
    for version in reversed(commits):
        body = bodies.get(version) or _read_body(destination, version)
        if body is None:
            continue
        if float(body.get("committed_at", 0)) < since:
            break
        keep |= set(body.get("remove") or ()) | set(_file_names(body.get("shards") or []))
    return keep


def recent_audits(destination: DatasetRoot, count: int) -> list[dict[str, Any]]:
    """The ``audit`` of the newest ``count`` commits that have one (mirror runs), oldest first, each with its
    commit's ``version``, ``file`` (where it was read) and ``committed_at``. Only commit files still present are
    read (``vacuum`` removes those past its retention), newest first until ``count`` are found."""
    found: list[dict[str, Any]] = []
    for version in reversed(commit_versions(destination)):
        if len(found) >= count:
            break
        try:
            body = _read_body(destination, version)
        except OSError:  # vacuumed meanwhile
            continue
        if body is not None and "audit" in body:
            where = {"version": version, "file": commit_path(version), "committed_at": body.get("committed_at")}
            found.append({**body["audit"], **where})  # where it was read wins over anything the audit says
    return found[::-1]


def removed_files(before: Snapshot, after: Snapshot) -> list[str]:
    """Files ``before`` names that ``after`` does not: what an overwrite may delete once it is committed.

    Also the attempt folders' own ``index.json`` files of the removed shards (never the root index).
    """
    kept = set(_file_names(after.shards))
    doomed = [name for name in _file_names(before.shards) if name not in kept]
    folders = {posixpath.dirname(name) for name in doomed} - {""}
    kept_folders = {posixpath.dirname(name) for name in kept}
    return doomed + sorted(f"{folder}/{INDEX_BASENAME}" for folder in folders - kept_folders)


# -- reading the log ---------------------------------------------------------------------------------------
def _log_listing(destination: DatasetRoot) -> tuple[list[int], list[int]]:
    """The versions of the commit files and of the checkpoints, each ascending."""
    commits, checkpoints = [], []
    for path in destination.list_relative(LOG_FOLDER):
        name = posixpath.basename(path)
        if match := _COMMIT_NAME.match(name):
            commits.append(int(match.group(1)))
        elif match := _CHECKPOINT_NAME.match(name):
            checkpoints.append(int(match.group(1)))
    return sorted(commits), sorted(checkpoints)


def _state_at(
    destination: DatasetRoot, commits: list[int], checkpoints: list[int]
) -> tuple[Snapshot, int, dict[int, dict[str, Any] | None]]:
    """The newest state, the version it was built from (a checkpoint, a whole-state commit, or 0), and the
    bodies of the commits read after it (None for a void one)."""
    newest = max(commits[-1] if commits else 0, checkpoints[-1] if checkpoints else 0)
    bodies: dict[int, dict[str, Any] | None] = {}
    # An overwrite after the newest checkpoint starts the state afresh: no checkpoint is read (nor bounded by a
    # smaller dataset than the one it holds).
    state, start = _fresh_start(destination, [v for v in commits if v > (checkpoints or [0])[-1]], bodies)
    if state is None:
        for version in reversed(checkpoints):
            state = _read_checkpoint(destination, version, checkpoint_limit(destination, commits, version))
            if state is not None:
                break
        start = state.version if state is not None else 0
    for version in reversed([v for v in commits if v > start]):
        body = bodies[version] if version in bodies else _read_body(destination, version)
        bodies[version] = body
        if body is not None and "shards" in body:  # an older log's commit holds the whole state
            state, start = _whole_state(body, version), version
            break
    base = start
    present = set(commits)
    current = state if state is not None else Snapshot(0, logged=True)
    for version in range(start + 1, newest + 1):
        if version not in present:
            raise LogDamagedError(
                f"The commit log of {destination.url} has no commit {commit_path(version)} although later "
                f"commits exist; the dataset's state cannot be rebuilt past version {version - 1}. Restore the "
                f"file, or write the dataset again (mode='overwrite')."
            )
        body = bodies[version] if version in bodies else _read_body(destination, version)
        current = _apply(current, body) if body is not None else _void(current, version)
    return current, base, bodies


def _fresh_start(
    destination: DatasetRoot, commits: list[int], bodies: dict[int, dict[str, Any] | None]
) -> tuple[Snapshot | None, int]:
    """The state just before the newest overwrite among ``commits`` (empty: an overwrite keeps nothing of it) and
    its version, or (None, 0) when none of them is one. Reads the bodies newest first into ``bodies``."""
    for version in reversed(commits):
        body = bodies[version] = _read_body(destination, version)
        if body is not None and "shards" in body:
            return None, 0  # an older log's whole state: the caller's loop starts from it
        if body is not None and body["operation"] == OVERWRITE:
            return Snapshot(version - 1, logged=True), version - 1
    return None, 0


def checkpoint_limit(destination: DatasetRoot, commits: list[int], version: int) -> int:
    """The most bytes the checkpoint of ``version`` may decompress to: what the dataset declares of its state.

    The published ``index.json`` and ``mds_conversion.json`` hold the newest state, and the commits after
    ``version`` say how it differs from the checkpoint's (an overwrite among them means the checkpoint is not
    read at all, `_fresh_start`); so a checkpoint larger than those files account for is not one our writers
    wrote, and is refused before it is decompressed (one planted by whoever can write the log folder would
    otherwise take gigabytes from a megabyte of gzip).
    """
    published = sum(destination.size(name) or 0 for name in (INDEX_BASENAME, METADATA_BASENAME))
    later = sum(destination.size(commit_path(v)) or 0 for v in commits if v > version)
    return CHECKPOINT_SLACK + 2 * published + COMMIT_FACTOR * later


def _apply(state: Snapshot, body: dict[str, Any]) -> Snapshot:
    """The state after one commit (of this format or an older one)."""
    if "shards" in body:
        return _whole_state(body, int(body["version"]))
    operation = body["operation"]
    kept = operation != OVERWRITE
    if operation == REPLACE:
        gone = set(body.get("remove") or ())
        shards = [shard for shard in state.shards if gone.isdisjoint(_file_names([shard]))]
    else:
        shards = state.shards if kept else []
    shards = shards + list(body.get("add") or [])
    metadata = state.metadata if kept else None
    record = body.get("record")
    if record is not None:
        runs = list((metadata or {}).get("runs", [])) if kept else []
        metadata = {"runs": [*runs, record][-RUNS_KEPT:], "latest": record}
    sources = dict(state.source_versions) if kept else {}
    sources.update({str(name): int(version) for name, version in (body.get("source_versions") or {}).items()})
    return Snapshot(int(body["version"]), shards, metadata, logged=True, source_versions=sources)


def _whole_state(body: dict[str, Any], version: int) -> Snapshot:
    sources = {str(name): int(v) for name, v in (body.get("source_versions") or {}).items()}
    return Snapshot(version, list(body["shards"]), body.get("metadata"), logged=True, source_versions=sources)


def _void(state: Snapshot, version: int) -> Snapshot:
    return Snapshot(version, state.shards, state.metadata, logged=True, source_versions=state.source_versions)


def _read_checkpoint(destination: DatasetRoot, version: int, limit: int) -> Snapshot | None:
    """The state the checkpoint of ``version`` holds, or None when it is gone, unreadable or past ``limit``."""
    where = destination.child(checkpoint_path(version))
    try:
        data = destination.read_bytes(checkpoint_path(version))
        declared = int.from_bytes(data[-4:], "little")  # gzip's trailer: the size it expands to (mod 4 GiB)
        if declared > limit or len(data) > limit:
            raise ValueError(
                f"it says it expands to {declared} bytes, more than the {limit} the dataset's files account for"
            )
        body = check_checkpoint(load_json(decompress("gz", data, limit), where), version, where)
    except (
        OSError,
        EOFError,
        ValueError,
        zlib.error,
    ) as err:  # gone meanwhile (vacuumed), or unreadable: an older one serves
        logger.warning("Checkpoint %s is not used (%s); the state is rebuilt from older files.", where, err)
        return None
    return _whole_state(body, version)


def _read_body(destination: DatasetRoot, version: int) -> dict[str, Any] | None:
    """The body of commit ``version``, or None when it is void (left empty or cut short by a killed writer)."""
    relative = commit_path(version)
    while True:
        text = destination.read_text(relative)
        try:
            return load_commit(text or "", version, destination.child(relative))
        except json.JSONDecodeError:
            pass  # not JSON (yet): still being written, or torn by a killed writer
        modified = destination.storage.modified(destination.child(relative))
        age = time.time() - (modified if modified is not None else 0)
        if age > TORN_COMMIT_WAIT:
            logger.warning(
                "Commit file %s is empty or not a commit %.0f s after it was last written: a writer was killed "
                "while creating it. It is void: version %d changed nothing.",
                destination.child(relative),
                age,
                version,
            )
            return None
        time.sleep(min(0.05, max(0.0, TORN_COMMIT_WAIT - age)) or 0.01)


def _file_names(shards: list[dict[str, Any]]) -> list[str]:
    return [info["basename"] for entry in shards for _, info in shard_files(entry)]


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _legacy_metadata(destination: DatasetRoot) -> dict[str, Any] | None:
    text = destination.read_text(METADATA_BASENAME)
    try:
        metadata = load_json(text, destination.child(METADATA_BASENAME)) if text else None
    except json.JSONDecodeError:
        return None
    return (
        check_conversion_record(metadata, destination.child(METADATA_BASENAME)) if isinstance(metadata, dict) else None
    )
