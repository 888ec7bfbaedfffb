"""Delta row tracking ids read from the table's own log and files, as the Delta protocol's readers must.

Where a table has row tracking enabled (``delta.enableRowTracking`` true, ``rowTracking`` among the protocol's
writer features), every row has a stable row id that ``UPDATE``, ``MERGE``, ``OPTIMIZE`` and ``RESTORE`` keep:
a mirror can use it as its key when the table has no key column. A row's id is its file's materialized row id
column (named by ``delta.rowTracking.materializedRowIdColumnName``, hidden from the schema) where that holds a
value, and otherwise the ``baseRowId`` of the file's ``add`` or ``remove`` action plus the row's position in
the file. delta-rs reads such tables but gives neither, so this module reads them itself:

* `row_tracking`: whether a table has row ids, and the name of its materialized column;
* `live_files`: the table's data files at a version with their ``baseRowId``, by replaying the log from its
  newest classic checkpoint (single or multi-part parquet) at or before that version;
* `stable_row_ids`: the ids of one file's rows.

A file with a deletion vector is read whole, its ids counted over every row it was written with, and the rows
the vector marks dropped after (`streaming.delta.deletion_vectors`). What cannot give ids here is
refused, never guessed: a V2 checkpoint with sidecar files, a file action without ``baseRowId``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streaming.delta.errors import HistoryUnavailableError, RowIdsUnavailableError
from streaming.delta.history import FileAction, file_action, parse_commit
from streaming.storage.parquet_bounds import check_checkpoint

#: The dataset column a mirror keyed by row ids stores each row's id in (int64).
ROW_ID = "_row_id"
TRACKING_PROPERTY = "delta.enableRowTracking"
SUSPENDED_PROPERTY = "delta.rowTrackingSuspended"
MATERIALIZED_PROPERTY = "delta.rowTracking.materializedRowIdColumnName"
_CLASSIC_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_V2_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(?:parquet|json)$")


@dataclass(frozen=True)
class RowTracking:
    """A table's row tracking: ``materialized`` is the hidden column of stable ids (None when not configured)."""

    materialized: str | None


def row_tracking(configuration: Mapping[str, str], writer_features: Sequence[str] | None) -> RowTracking | None:
    """The table's `RowTracking` when row ids can be relied on (the protocol's "enabled"), else None."""
    enabled = str(configuration.get(TRACKING_PROPERTY, "false")).strip().lower() == "true"
    suspended = str(configuration.get(SUSPENDED_PROPERTY, "false")).strip().lower() == "true"
    if not enabled or suspended or "rowTracking" not in (writer_features or ()):
        return None
    return RowTracking(configuration.get(MATERIALIZED_PROPERTY) or None)


def stable_row_ids(count: int, action: FileAction, materialized: pa.Array | pa.ChunkedArray | None) -> pa.Array:
    """The stable row ids of a file's ``count`` rows in file order: the materialized id where there is one,
    else ``baseRowId`` + position (``materialized`` is that column of the file, None when the file lacks it)."""
    stored = None
    if materialized is not None:
        stored = pc.cast(materialized, pa.int64())
        stored = stored.combine_chunks() if isinstance(stored, pa.ChunkedArray) else stored
    if stored is not None and stored.null_count == 0:
        return stored
    if action.base_row_id is None:
        raise RowIdsUnavailableError(f"the log gives no baseRowId for {action.path}, so its rows' ids are unknown")
    default = pa.array(np.arange(action.base_row_id, action.base_row_id + count, dtype=np.int64))
    return default if stored is None else pc.coalesce(stored, default)


def live_files(filesystem: Any, read_text: Callable[[str], str | None], version: int, table: str) -> list[FileAction]:
    """The data files of ``version`` (each as its latest ``add`` action), replayed from the newest classic
    checkpoint at or before ``version`` and the commit files after it.

    ``filesystem`` is a pyarrow filesystem rooted at the table; ``read_text`` reads a file under it (None when
    missing). A checkpoint whose footers declare more than its own bytes can hold (`check_checkpoint`) is refused
    before any is read. Raises
    `HistoryUnavailableError` when a commit file the replay needs is gone, `RowIdsUnavailableError` for a V2
    checkpoint the replay would have to start from, `ParquetBoundsError` for such a checkpoint.
    """
    from pyarrow.fs import FileSelector

    names = [info.base_name for info in filesystem.get_file_info(FileSelector("_delta_log", allow_not_found=True))]
    start, parts = _newest_checkpoint(names, version)
    v2 = sorted(int(match.group(1)) for match in map(_V2_CHECKPOINT.match, names) if match)
    files: dict[tuple[str, str | None], FileAction] = {}
    _check_checkpoint_adds(filesystem, parts, start, table)
    for part in parts:
        with filesystem.open_input_file(f"_delta_log/{part}") as handle:
            adds = pq.read_table(handle, columns=["add"]).column("add")
        for raw in adds.drop_null().to_pylist():
            action = file_action({**raw, "partitionValues": _as_dict(raw.get("partitionValues"))})
            files[action.key] = action
    for number in range(start + 1, version + 1):
        name = f"_delta_log/{number:020d}.json"
        text = read_text(name)
        if text is None:
            if any(start < checkpoint <= version for checkpoint in v2):
                raise RowIdsUnavailableError(
                    f"{table} keeps its log in V2 checkpoints (with sidecar files), which are not read here"
                )
            raise HistoryUnavailableError(
                f"the commit file of version {number} of {table} ({name}) is gone and no checkpoint at or before "
                f"version {version} replaces it",
                number,
            )
        commit = parse_commit(number, text.split("\n"), f"{table}/{name}")
        for action in commit.removes:
            files.pop(action.key, None)
        for action in commit.adds:
            files[action.key] = action
    return list(files.values())


def _check_checkpoint_adds(filesystem: Any, parts: Sequence[str], version: int, table: str) -> None:
    """Refuse checkpoint ``parts`` of ``version`` whose footers are past the bounds of `check_checkpoint` (more
    actions than bytes, more decoded bytes than such actions take), before any is read. Each file is compared
    with itself: the table's files now may be fewer than a past version's (VACUUM)."""
    for part in parts:
        name = f"_delta_log/{part}"
        with filesystem.open_input_file(name) as handle:
            check_checkpoint(handle, f"The checkpoint {part} of version {version} of {table}", handle.size())


def _newest_checkpoint(names: Sequence[str], version: int) -> tuple[int, list[str]]:
    """The newest complete classic checkpoint at or before ``version``: its version and part files
    (``-1, []`` when there is none, so the replay starts at version 0)."""
    found: dict[tuple[int, int], set[str]] = {}
    for name in names:
        match = _CLASSIC_CHECKPOINT.match(name)
        if match is None or int(match.group(1)) > version:
            continue
        total = int(match.group(3)) if match.group(3) else 1
        found.setdefault((int(match.group(1)), total), set()).add(name)
    complete = [(number, total) for (number, total), parts in found.items() if len(parts) == total]
    if not complete:
        return -1, []
    number, total = max(complete)
    return number, sorted(found[(number, total)])


def _as_dict(values: Any) -> dict[str, Any] | None:
    """A checkpoint's ``partitionValues`` (an Arrow map: a list of pairs) as the JSON log's object."""
    if values is None or isinstance(values, dict):
        return values
    return dict(values)
