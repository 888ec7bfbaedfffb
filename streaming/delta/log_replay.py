"""A Delta table's log read once up to a version: its protocol, metadata and data files, and the commits it read.

The replay the Delta protocol describes, done here rather than by delta-rs so that the snapshot
(`streaming.delta.snapshot`) and the changes between two snapshots (`streaming.delta.changes_between`) share one
read of the log. `replay` lists ``_delta_log`` once, starts from the newest complete checkpoint at or before the
version (classic single file, multi-part, or V2 in Parquet or JSON with its sidecar files in
``_delta_log/_sidecars``), and reads each commit file after it once. The commits it read are kept (`LogState.commits`),
so a window of versions after the checkpoint is not read again.

A checkpoint is untrusted: every Parquet file of one (part or sidecar) is bounded by its own bytes
(`streaming.storage.parquet_bounds.check_checkpoint`) before it is decoded, and a sidecar is read only from the
log's own ``_sidecars`` folder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq

from streaming.delta.errors import DeltaLogError, HistoryUnavailableError
from streaming.delta.history import FileAction, TableCommit, file_action, parse_commit
from streaming.format.commit_checks import load_json
from streaming.storage.parquet_bounds import check_checkpoint
from streaming.storage.untrusted_text import shown

LOG = "_delta_log"
SIDECARS = f"{LOG}/_sidecars"
_COMMIT = re.compile(r"^(\d{20})\.json$")
#: A checkpoint: classic single (no group), one part of a multi-part one (part, parts), or V2 (its id, its format).
_CHECKPOINT = re.compile(
    r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10})\.parquet|\.([0-9a-fA-F-]{36})\.(parquet|json)|\.parquet)$"
)
#: The checkpoint columns a replay uses; a checkpoint's other actions (txn, domainMetadata, remove tombstones) are
#: not part of a snapshot's state as this package reads it.
_CHECKPOINT_COLUMNS = ("add", "metaData", "protocol", "sidecar")


@dataclass(frozen=True)
class LogState:
    """The table ``uri`` at ``version`` as its log gives it.

    Attributes:
        checkpoint: the version of the checkpoint the replay started from (-1: none, it started at version 0).
        metadata, protocol: the version's ``metaData`` and ``protocol`` actions as the log writes them.
        files: the version's data files, each as its latest ``add`` action, by `FileAction.key`.
        commits: the commits read after the checkpoint, by version (``checkpoint + 1 .. version``).
        base_metadata: the ``metaData`` in effect at ``checkpoint`` (the checkpoint's; None without one).
        log_files_read: the log's files the replay opened (checkpoint parts, sidecars, commits).
    """

    uri: str
    version: int
    checkpoint: int
    metadata: Mapping[str, Any]
    protocol: Mapping[str, Any]
    files: Mapping[tuple[str, str | None], FileAction]
    commits: Mapping[int, TableCommit]
    base_metadata: Mapping[str, Any] | None
    log_files_read: int

    def metadata_at(self, version: int) -> Mapping[str, Any] | None:
        """The ``metaData`` in effect at ``version``, when the replay passed it (``checkpoint`` or later), else None."""
        if version < self.checkpoint or version > self.version:
            return None
        metadata = self.base_metadata
        for number in range(self.checkpoint + 1, version + 1):
            found = self.commits[number].metadata
            if found is not None:
                metadata = found
        return metadata


@dataclass(frozen=True)
class LogListing:
    """The names in ``_delta_log``: the versions with commit files, and each version's checkpoints."""

    commits: frozenset[int]
    checkpoints: Mapping[int, list[list[str]]]  # version -> complete checkpoints, each as its files

    @property
    def newest(self) -> int | None:
        versions = [*self.commits, *self.checkpoints]
        return max(versions) if versions else None


def list_log(filesystem: Any) -> LogListing:
    """One listing of ``_delta_log`` (a checkpoint of several parts counts only when every part is there)."""
    from pyarrow.fs import FileSelector, FileType

    commits: set[int] = set()
    groups: dict[tuple[int, str], set[str]] = {}
    totals: dict[tuple[int, str], int] = {}
    for info in filesystem.get_file_info(FileSelector(LOG, allow_not_found=True)):
        if info.type != FileType.File:
            continue
        name = info.base_name
        commit = _COMMIT.match(name)
        if commit:
            commits.add(int(commit.group(1)))
            continue
        match = _CHECKPOINT.match(name)
        if match is None:
            continue
        version = int(match.group(1))
        if match.group(3):
            group = (version, f"parts-{int(match.group(3))}")
            totals[group] = int(match.group(3))
        else:
            group = (version, match.group(4) or "single")
            totals[group] = 1
        groups.setdefault(group, set()).add(name)
    checkpoints: dict[int, list[list[str]]] = {}
    for (version, kind), names in sorted(groups.items()):
        if len(names) == totals[(version, kind)]:
            checkpoints.setdefault(version, []).append(sorted(names))
    return LogListing(frozenset(commits), checkpoints)


def replay(
    filesystem: Any,
    read_text: Callable[[str], str | None],
    uri: str,
    version: int | None = None,
    listing: LogListing | None = None,
) -> LogState:
    """The table ``uri`` at ``version`` (the newest when None) from its log under ``filesystem`` (a pyarrow
    filesystem rooted at the table); ``read_text`` reads a file under it (None when missing).

    Raises `DeltaLogError` for a folder without a log, or a version past the newest; `HistoryUnavailableError`
    when a commit file the replay needs is gone (log cleanup); `ParquetBoundsError` for a checkpoint file past its
    bounds; `DeltaLogError` for a damaged checkpoint."""
    listing = listing or list_log(filesystem)
    newest = listing.newest
    if newest is None:
        raise DeltaLogError(f"{shown(uri)} is not a Delta table: its {LOG} folder holds no commit or checkpoint.")
    if version is None:
        version = newest
    elif version < 0 or version > newest:
        raise DeltaLogError(f"The Delta table {shown(uri)} has no version {version}; its newest is {newest}.")
    start = max((number for number in listing.checkpoints if number <= version), default=-1)
    read = 0
    files: dict[tuple[str, str | None], FileAction] = {}
    metadata: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None
    if start >= 0:
        checkpoint = _read_checkpoint(filesystem, read_text, listing.checkpoints[start][0], start, uri)
        read += checkpoint.files_read
        metadata, protocol = checkpoint.metadata, checkpoint.protocol
        for action in checkpoint.adds:
            files[action.key] = action
    base_metadata = metadata
    commits: dict[int, TableCommit] = {}
    for number in range(start + 1, version + 1):
        name = f"{LOG}/{number:020d}.json"
        text = read_text(name)
        if text is None:
            raise HistoryUnavailableError(
                f"version {version} of {uri} cannot be read: the commit file of version {number} ({name}) is gone "
                f"and no checkpoint at or before version {version} replaces it (Delta removes commit files older "
                f"than the table's delta.logRetentionDuration when it writes a checkpoint)",
                number,
            )
        read += 1
        commit = parse_commit(number, text.split("\n"), f"{uri}/{name}")
        commits[number] = commit
        for action in commit.removes:
            files.pop(action.key, None)
        for action in commit.adds:
            files[action.key] = action
        metadata = commit.metadata if commit.metadata is not None else metadata
        protocol = commit.protocol if commit.protocol is not None else protocol
    if metadata is None or protocol is None:
        missing = "metaData" if metadata is None else "protocol"
        raise DeltaLogError(
            f"Version {version} of the Delta table {shown(uri)} has no {missing} action in its log; the log is damaged."
        )
    return LogState(uri, version, start, metadata, protocol, files, commits, base_metadata, read)


@dataclass(frozen=True)
class _Checkpoint:
    adds: list[FileAction]
    metadata: Mapping[str, Any] | None
    protocol: Mapping[str, Any] | None
    files_read: int


def _read_checkpoint(
    filesystem: Any, read_text: Callable[[str], str | None], names: Sequence[str], version: int, uri: str
) -> _Checkpoint:
    """A checkpoint's actions: its parts (Parquet) or its one V2 JSON file, then the sidecars it names."""
    rows: dict[str, list[Any]] = {column: [] for column in _CHECKPOINT_COLUMNS}
    read = 0
    for name in names:
        path = f"{LOG}/{name}"
        where = f"The checkpoint {name} of version {version} of {shown(uri)}"
        if name.endswith(".json"):
            text = read_text(path)
            if text is None:
                raise HistoryUnavailableError(f"{where} is gone", version)
            for number, line in enumerate(text.split("\n"), 1):
                if not line.strip():
                    continue
                action = load_json(line, f"{uri}/{path} line {number}")
                if not isinstance(action, dict):
                    raise DeltaLogError(f"{where} holds a line ({number}) that is not a Delta action.")
                for column in _CHECKPOINT_COLUMNS:
                    if isinstance(action.get(column), dict):
                        rows[column].append(action[column])
        else:
            for column, values in _parquet_actions(filesystem, path, where).items():
                rows[column].extend(values)
        read += 1
    for sidecar in rows["sidecar"]:
        relative = _sidecar_path(sidecar, version, uri)
        where = f"The sidecar {shown(relative)} of the checkpoint of version {version} of {shown(uri)}"
        try:
            rows["add"].extend(_parquet_actions(filesystem, relative, where, ("add",))["add"])
        except FileNotFoundError:
            raise HistoryUnavailableError(f"{where} is gone", version) from None
        read += 1
    adds = [file_action({**raw, "partitionValues": _as_dict(raw.get("partitionValues"))}) for raw in rows["add"]]
    metadata = rows["metaData"][-1] if rows["metaData"] else None
    if metadata is not None:
        metadata = {**metadata, "configuration": _as_dict(metadata.get("configuration")) or {}}
    protocol = rows["protocol"][-1] if rows["protocol"] else None
    return _Checkpoint(adds, metadata, protocol, read)


def _parquet_actions(
    filesystem: Any, path: str, where: str, columns: Sequence[str] = _CHECKPOINT_COLUMNS
) -> dict[str, list[Any]]:
    """The non-null actions of ``columns`` in a checkpoint's Parquet file, bounded before it is decoded."""
    with filesystem.open_input_file(path) as handle:
        check_checkpoint(handle, where, handle.size())
        parquet = pq.ParquetFile(handle)
        present = [column for column in columns if column in parquet.schema_arrow.names]
        table = parquet.read(columns=present, use_threads=False)
    return {column: table.column(column).drop_null().to_pylist() for column in present}


def _sidecar_path(sidecar: Mapping[str, Any], version: int, uri: str) -> str:
    """A sidecar's path under the table: only a file of the log's own ``_sidecars`` folder (the protocol keeps
    them there), never a path that leaves it."""
    name = unquote(str(sidecar.get("path") or ""))
    prefix = f"{SIDECARS}/"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    if not name or "/" in name or "\\" in name or name in (".", "..") or ":" in name:
        raise DeltaLogError(
            f"The checkpoint of version {version} of the Delta table {shown(uri)} names the sidecar "
            f"{shown(str(sidecar.get('path')))}, which is not a file of its {SIDECARS} folder; it was not read."
        )
    return prefix + name


def _as_dict(values: Any) -> dict[str, Any] | None:
    """A checkpoint's map (an Arrow map reads as a list of pairs) as the JSON log's object."""
    if values is None or isinstance(values, dict):
        return values
    return dict(values)


def metadata_schema(metadata: Mapping[str, Any]) -> str:
    """The ``schemaString`` of a ``metaData`` action (``{}`` of no fields when it has none)."""
    schema = metadata.get("schemaString")
    return schema if isinstance(schema, str) else json.dumps({"type": "struct", "fields": []})
