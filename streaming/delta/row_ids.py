"""Delta row tracking ids read from the table's own log and files, as the Delta protocol's readers must.

Where a table has row tracking enabled (``delta.enableRowTracking`` true, ``rowTracking`` among the protocol's
writer features), every row has a stable row id that ``UPDATE``, ``MERGE``, ``OPTIMIZE`` and ``RESTORE`` keep:
a mirror can use it as its key when the table has no key column. A row's id is its file's materialized row id
column (named by ``delta.rowTracking.materializedRowIdColumnName``, hidden from the schema) where that holds a
value, and otherwise the ``baseRowId`` of the file's ``add`` or ``remove`` action plus the row's position in
the file. delta-rs reads such tables but gives neither, so this package reads them itself (the files with their
``baseRowId`` from its own replay of the log, `streaming.delta.log_replay`):

* `row_tracking`: whether a table has row ids, and the name of its materialized column;
* `stable_row_ids`: the ids of one file's rows.

A file with a deletion vector is read whole, its ids counted over every row it was written with, and the rows
the vector marks dropped after (`streaming.delta.deletion_vectors`). What cannot give ids here is
refused, never guessed: a file action without ``baseRowId``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.delta.errors import RowIdsUnavailableError
from streaming.delta.history import FileAction

#: The dataset column a mirror keyed by row ids stores each row's id in (int64).
ROW_ID = "_row_id"
TRACKING_PROPERTY = "delta.enableRowTracking"
SUSPENDED_PROPERTY = "delta.rowTrackingSuspended"
MATERIALIZED_PROPERTY = "delta.rowTracking.materializedRowIdColumnName"


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
