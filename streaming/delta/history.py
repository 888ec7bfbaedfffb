"""A Delta table's history between two versions, as the incremental job reads it: what changed data, how.

Two sources give it. A table's ``_delta_log`` commit files (``<version:020>.json``, one action per line, as the
Delta protocol defines them) give everything: the operation and its parameters (``commitInfo``), every file
added and removed with its ``dataChange`` flag, partition values and deletion vector, and any new ``metaData``
(schema, table properties). ``DESCRIBE HISTORY`` (what Spark offers for a Unity Catalog table name) gives
only the operation, its parameters and the version; there, whether a commit changed data is read from the
operation's name, as Delta's own ``DeltaOperations.scala`` marks each operation (``changesData``).

What the job needs from a window of versions ``start + 1 .. end``:

* whether any commit in it changed data (`TableWindow.changes_data`): maintenance commits (``OPTIMIZE``,
  ``ZORDER``, auto compaction, predictive optimization, ``REORG``, ``VACUUM START/END``, property and
  constraint changes) write only ``dataChange=false`` actions or none, and change no row;
* the files whose rows changed (`TableWindow.changed_files`): every ``add`` and ``remove`` with
  ``dataChange=true``, where a file added and removed again inside the window cancels out. Rearranging
  commits (``dataChange=false``) add exactly the rows they remove, so leaving them out keeps the sum right;
* whether the Change Data Feed was on at every version of the window (`TableWindow.feed_enabled_throughout`),
  from the ``delta.enableChangeDataFeed`` property each version had, not from today's properties;
* which commits replace the table (`TableWindow.replacements`, by Delta's operation names) and which change
  its schema (`TableWindow.schema_changes`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming.delta.errors import HistoryUnavailableError
from streaming.format.commit_checks import load_json

CDF_PROPERTY = "delta.enableChangeDataFeed"
COLUMN_MAPPING_PROPERTY = "delta.columnMapping.mode"

#: The operations that replace a table's content and metadata at once, by the names Delta records for them
#: (``DeltaOperations.ReplaceTable``, ``Restore`` and ``Clone``). ``df.write.saveAsTable(name, mode="overwrite")``
#: and ``CREATE OR REPLACE TABLE ... AS SELECT`` both record ``CREATE OR REPLACE TABLE AS SELECT``.
REPLACE_OPERATIONS = frozenset(
    {
        "REPLACE TABLE",
        "REPLACE TABLE AS SELECT",
        "CREATE OR REPLACE TABLE",
        "CREATE OR REPLACE TABLE AS SELECT",
        "RESTORE",
        "CLONE",
    }
)
#: Operations whose commits change rows (``changesData`` in ``DeltaOperations.scala``); every other operation
#: (OPTIMIZE, REORG, VACUUM START/END, SET/UNSET TBLPROPERTIES, ADD/CHANGE/DROP COLUMNS, constraints, ...)
#: leaves the rows as they are. Only needed where the file actions are unknown (``DESCRIBE HISTORY``).
DATA_CHANGING_OPERATIONS = frozenset(
    {
        "WRITE",
        "STREAMING UPDATE",
        "DELETE",
        "TRUNCATE",
        "CONVERT",
        "MERGE",
        "UPDATE",
        "CREATE TABLE AS SELECT",
        *REPLACE_OPERATIONS,
    }
)
#: Operations that change the schema without replacing the table (Delta's names, ``DESCRIBE HISTORY`` only).
SCHEMA_OPERATIONS = frozenset(
    {"ADD COLUMNS", "CHANGE COLUMN", "CHANGE COLUMNS", "REPLACE COLUMNS", "RENAME COLUMN", "DROP COLUMNS"}
)
#: Operations after which the table's properties are those the operation's ``properties`` parameter lists.
_PROPERTY_RESETS = frozenset({"CREATE TABLE", "CREATE TABLE AS SELECT", *REPLACE_OPERATIONS} - {"RESTORE", "CLONE"})


@dataclass(frozen=True)
class FileAction:
    """One ``add`` or ``remove`` action of a commit.

    Attributes:
        path: the file's path as the log writes it (relative to the table root and URL-encoded, or a URI).
        data_change: the action's ``dataChange`` flag.
        partition_values: partition column → its value as text (None for NULL), when the action says.
        deletion_vector: an identifier of the action's deletion vector, or None without one.
        base_row_id: the row id of the file's first row where the table tracks rows (``baseRowId``), else None.
        vector: the action's deletion vector descriptor as the log gives it, or None without one.
        stats: the action's statistics as the log writes them (JSON text), or None without.
        size: the file's size in bytes as the action declares it, or None where it does not (or not as a count).
    """

    path: str
    data_change: bool
    partition_values: Mapping[str, str | None] | None = None
    deletion_vector: str | None = None
    base_row_id: int | None = None
    vector: Mapping[str, Any] | None = field(default=None, compare=False)
    stats: str | None = field(default=None, compare=False, repr=False)
    size: int | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str | None]:
        """What identifies the rows the action adds or removes: a file, minus its deletion vector's rows."""
        return self.path, self.deletion_vector


@dataclass(frozen=True)
class TableCommit:
    """One version of a table's history.

    Attributes:
        version: the table version this commit made.
        operation: ``commitInfo.operation`` (e.g. ``WRITE``, ``MERGE``, ``OPTIMIZE``).
        parameters: ``commitInfo.operationParameters``.
        adds, removes: the commit's file actions (empty when ``files_known`` is False).
        configuration: the table properties a ``metaData`` action of this commit set, or None without one.
        schema: the ``schemaString`` of that ``metaData`` action (`normal_schema`).
        files_known: whether the file actions are known (False for a ``DESCRIBE HISTORY`` row).
        changes: the change data files the commit wrote (``cdc`` actions: its Change Data Feed, when written).
        metadata, protocol: the commit's ``metaData`` and ``protocol`` actions as the log writes them (None without).
    """

    version: int
    operation: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    adds: tuple[FileAction, ...] = ()
    removes: tuple[FileAction, ...] = ()
    configuration: Mapping[str, str] | None = None
    schema: str | None = None
    files_known: bool = True
    changes: tuple[FileAction, ...] = ()
    metadata: Mapping[str, Any] | None = field(default=None, compare=False)
    protocol: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def changes_data(self) -> bool:
        """Whether this commit changed rows: a ``dataChange=true`` action, or a data-changing operation."""
        if self.files_known:
            return any(action.data_change for action in (*self.adds, *self.removes))
        return self.operation.upper() in DATA_CHANGING_OPERATIONS

    @property
    def replaces(self) -> bool:
        """Whether this commit replaces the table (by Delta's operation name)."""
        return self.operation.upper() in REPLACE_OPERATIONS

    def describe(self) -> str:
        return f"version {self.version} ({self.operation})"


@dataclass(frozen=True)
class TableWindow:
    """The commits of versions ``start + 1 .. end`` of a table, and the feed's setting at ``start``.

    Attributes:
        start: the version the window starts after (the version the dataset holds).
        end: the last version of the window.
        commits: one commit per version, in order.
        feed_at_start: whether the Change Data Feed was enabled at ``start`` (None: not known).
        schema_at_start: the table's schema string at ``start`` (`normal_schema`), when known.
    """

    start: int
    end: int
    commits: tuple[TableCommit, ...]
    feed_at_start: bool | None
    schema_at_start: str | None = None

    def __post_init__(self) -> None:
        versions = [commit.version for commit in self.commits]
        if versions != list(range(self.start + 1, self.end + 1)):
            raise ValueError(f"A window {self.start}..{self.end} needs one commit per version, got {versions}.")

    @property
    def changes_data(self) -> bool:
        """Whether any commit of the window changed rows."""
        return any(commit.changes_data for commit in self.commits)

    @property
    def files_known(self) -> bool:
        return all(commit.files_known for commit in self.commits)

    def feed_enabled_throughout(self) -> bool:
        """Whether the Change Data Feed was enabled at every version of the window (False when not known)."""
        enabled = self.feed_at_start
        for commit in self.commits:
            setting = feed_setting(commit)
            if setting is not _UNCHANGED:
                enabled = setting  # type: ignore[assignment]
            if not enabled:
                return False
        return bool(self.commits)

    def replacements(self) -> list[str]:
        """The commits that replace the table, described."""
        return [commit.describe() for commit in self.commits if commit.replaces]

    def schema_changes(self) -> list[str]:
        """The commits that change the table's schema, described."""
        found = []
        schema = self.schema_at_start
        for commit in self.commits:
            if commit.files_known:
                if commit.schema is not None and commit.schema != schema:
                    found.append(commit.describe())  # an unknown starting schema counts as changed
                    schema = commit.schema
            elif commit.operation.upper() in SCHEMA_OPERATIONS or _merges_schema(commit):
                found.append(commit.describe())
        return found

    def changed_files(self) -> tuple[list[tuple[FileAction, int]], list[tuple[FileAction, int]]]:
        """The ``dataChange=true`` files the window added and removed, each with the version that added or
        removed it, after cancelling every file that was both added and removed inside the window.

        Counted as multisets: a file can be added twice with no data-changing remove between (OPTIMIZE moves its
        rows into a compacted file with ``dataChange=false``, then a RESTORE adds it back and removes the
        compacted one), and both adds carry rows the window's removes take away. A remove cancels the file's
        latest add still open.
        """
        adds: list[tuple[FileAction, int] | None] = []
        open_adds: dict[tuple[str, str | None], list[int]] = {}  # positions in `adds` of a file's uncancelled adds
        removed: list[tuple[FileAction, int]] = []
        for commit in self.commits:
            for action in commit.removes:
                if not action.data_change:
                    continue
                positions = open_adds.get(action.key)
                if positions:
                    adds[positions.pop()] = None  # added and removed inside the window: its rows never counted
                else:
                    removed.append((action, commit.version))
            for action in commit.adds:
                if action.data_change:
                    open_adds.setdefault(action.key, []).append(len(adds))
                    adds.append((action, commit.version))
        return [add for add in adds if add is not None], removed


_UNCHANGED = object()


def feed_setting(commit: TableCommit) -> bool | None | object:
    """The feed setting a commit leaves the table with: True/False, None when it cannot be known from this
    source (a RESTORE or CLONE read from ``DESCRIBE HISTORY``), or `_UNCHANGED`."""
    if commit.files_known:
        if commit.configuration is None:
            return _UNCHANGED
        return _is_true(commit.configuration.get(CDF_PROPERTY))
    operation = commit.operation.upper()
    parameters = commit.parameters or {}
    if operation == "SET TBLPROPERTIES":
        properties = _json_parameter(parameters.get("properties"), {})
        return _is_true(properties[CDF_PROPERTY]) if CDF_PROPERTY in properties else _UNCHANGED
    if operation == "UNSET TBLPROPERTIES":
        return False if CDF_PROPERTY in _json_parameter(parameters.get("properties"), []) else _UNCHANGED
    if operation in _PROPERTY_RESETS:
        return _is_true(_json_parameter(parameters.get("properties"), {}).get(CDF_PROPERTY))
    if operation in ("RESTORE", "CLONE"):
        return None
    return _UNCHANGED


def touches_feed(commit: TableCommit) -> bool:
    """Whether a commit may change the feed's setting."""
    return feed_setting(commit) is not _UNCHANGED


def feed_at_version(history: Sequence[TableCommit], version: int) -> bool | None:
    """The feed setting at ``version`` from a history starting at version 0 (None if it does not)."""
    ordered = sorted((commit for commit in history if commit.version <= version), key=lambda c: c.version)
    if not ordered or ordered[0].version != 0:
        return None
    enabled: bool | None = False
    for commit in ordered:
        setting = feed_setting(commit)
        if setting is not _UNCHANGED:
            enabled = setting  # type: ignore[assignment]
    return enabled


def parse_commit(version: int, lines: Iterable[str], where: str) -> TableCommit:
    """A commit from the lines of its ``_delta_log/<version>.json`` file (``where`` names it in errors)."""
    operation, parameters = "", {}
    adds, removes, changes = [], [], []
    configuration, schema, metadata, protocol = None, None, None, None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            action = load_json(line, f"{where} line {number}")
        except json.JSONDecodeError as err:
            raise ValueError(f"{where} line {number} is not JSON ({err}); the table's log is damaged.") from None
        if not isinstance(action, dict):
            raise ValueError(f"{where} line {number} is not a Delta action object.")
        if "commitInfo" in action:
            info = action["commitInfo"] or {}
            operation = str(info.get("operation") or "")
            parameters = dict(info.get("operationParameters") or {})
        elif "add" in action:
            adds.append(file_action(action["add"]))
        elif "remove" in action:
            removes.append(file_action(action["remove"]))
        elif "cdc" in action:
            changes.append(file_action(action["cdc"]))
        elif "metaData" in action:
            metadata = action["metaData"] or {}
            configuration = dict(metadata.get("configuration") or {})
            schema = normal_schema(metadata.get("schemaString"))
        elif "protocol" in action:
            protocol = action["protocol"] or {}
    return TableCommit(
        version,
        operation,
        parameters,
        tuple(adds),
        tuple(removes),
        configuration,
        schema,
        changes=tuple(changes),
        metadata=metadata,
        protocol=protocol,
    )


def read_log_window(
    read_text: Callable[[str], str | None],
    start: int,
    end: int,
    *,
    feed_at_start: bool | None,
    schema_at_start: str | None,
    table: str,
    known: Mapping[int, TableCommit] | None = None,
) -> TableWindow:
    """The window ``start + 1 .. end`` from the commit files, read with ``read_text(log-relative path)`` (None
    for a missing file) where ``known`` (commits already read, by version) lacks them; raises
    `HistoryUnavailableError` naming the first version whose commit file is gone."""
    commits = []
    for version in range(start + 1, end + 1):
        if known and version in known:
            commits.append(known[version])
            continue
        name = f"_delta_log/{version:020d}.json"
        text = read_text(name)
        if text is None:
            raise HistoryUnavailableError(
                f"the commit file of version {version} of {table} ({name}) is gone (Delta removes commit files "
                f"older than the table's delta.logRetentionDuration when it writes a checkpoint)",
                version,
            )
        commits.append(parse_commit(version, text.split("\n"), f"{table}/{name}"))
    return TableWindow(start, end, tuple(commits), feed_at_start, schema_at_start)


def normal_schema(schema: str | None) -> str | None:
    """A ``schemaString`` in one spelling (keys sorted), so that equal schemas compare equal as text."""
    if schema is None:
        return None
    try:
        return json.dumps(json.loads(schema), sort_keys=True)
    except (TypeError, ValueError):
        return schema


def history_commit(version: int, operation: str, parameters: Mapping[str, Any] | None) -> TableCommit:
    """A commit from a ``DESCRIBE HISTORY`` row (no file actions)."""
    return TableCommit(int(version), str(operation or ""), dict(parameters or {}), files_known=False)


def file_action(raw: Mapping[str, Any]) -> FileAction:
    """A `FileAction` from an ``add`` or ``remove`` action as the log (or a checkpoint's row) holds it."""
    vector = raw.get("deletionVector")
    vector_id = None
    if isinstance(vector, dict):
        vector_id = f"{vector.get('storageType')}:{vector.get('pathOrInlineDv')}@{vector.get('offset')}"
    values = raw.get("partitionValues")
    return FileAction(
        path=str(raw.get("path")),
        data_change=bool(raw.get("dataChange", True)),
        partition_values=dict(values) if isinstance(values, dict) else None,
        deletion_vector=vector_id,
        base_row_id=_row_id_field(raw.get("baseRowId")),
        vector=dict(vector) if isinstance(vector, dict) else None,
        stats=raw.get("stats") if isinstance(raw.get("stats"), str) else None,
        size=_count(raw.get("size")),
    )


def _count(value: Any) -> int | None:
    """A non-negative integer the log declares (a file's ``size``, say), None for anything else."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _row_id_field(value: Any) -> int | None:
    """``baseRowId`` as an int, None when absent; a value of another kind is a damaged log, not an id."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"A file action's baseRowId is {value!r}, not a row id; the table's log is damaged.")
    return value


def _merges_schema(commit: TableCommit) -> bool:
    """A write that may have added columns (``mergeSchema``/``overwriteSchema``), as far as its parameters say."""
    parameters = commit.parameters or {}
    return any(_is_true(parameters.get(key)) for key in ("mergeSchema", "overwriteSchema"))


def _json_parameter(value: Any, default: Any) -> Any:
    if isinstance(value, (dict, list)):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) else default
    except json.JSONDecodeError:
        return default
    return parsed if isinstance(parsed, type(default)) else default


def _is_true(value: Any) -> bool:
    return str(value).strip().strip('"').lower() == "true"
