"""The one reader of a Delta table's data files: a file with its partition values, column mapping, deletion vector
and row ids, as Arrow batches under the table's logical names and types.

The second of the package's three seams (`streaming.delta.snapshot`, `scan`, `streaming.delta.changes_between`), after
delta-kernel's ``Scan``. Every path that reads a Delta table's rows without Spark reads them here, file by file:
`convert`'s pyarrow engine (`snapshot_batches`), Spark's path reading a Delta path without Delta support
(`snapshot_rows`), the incremental job's snapshots, changed files and Change Data Feed (`Scan.rows`). For each file
(`Scan.file_batches`):

* its columns are found by the names (or field ids) the table's column mapping gives them
  (`streaming.delta.column_mapping`), each cast to the pinned version's type (`_logical`: the one place a column
  of one file becomes the table's: an older file's narrower type widened, `streaming.delta.widening`; timestamps
  of every Parquet physical type as microseconds, `streaming.delta.timestamps`; a VARIANT as its JSON text,
  `streaming.delta.variant`); a column the file lacks is NULL;
* a partition column takes the value the file's own action gives (an empty value is NULL, as the protocol reads
  it): an overwrite may have partitioned the table otherwise since;
* with a deletion vector, the rows it marks are dropped (`streaming.delta.deletion_vectors`), after row ids, which
  count every row the file was written with, are taken (`streaming.delta.row_ids`);
* a file gone from the store (VACUUM) is `HistoryUnavailableError` naming the version that added or removed it.

A file is the unit: a reader that streams a pinned version (a dataset over the table's files) asks for one file's
batches at a time (`Scan.file_batches`) with the snapshot's file list.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streaming.delta.deletion_vectors import deleted_positions
from streaming.delta.errors import (
    FilesNotReadableError,
    HistoryUnavailableError,
    RowIdsUnavailableError,
    UnsupportedTableFeatureError,
)
from streaming.delta.history import FileAction
from streaming.delta.row_ids import ROW_ID, RowTracking, stable_row_ids
from streaming.delta.snapshot import Snapshot, first_line
from streaming.delta.timestamps import PARQUET_OPTIONS, check_proleptic, legacy_calendar
from streaming.delta.variant import json_texts, nested_variants, variant_columns
from streaming.delta.widening import widened

#: Rows per batch where the caller does not say.
BATCH_ROWS = 1 << 16
#: The Change Data Feed's column of a change data file (``insert``, ``delete``, ``update_preimage``...).
CHANGE_TYPE = "_change_type"


class Scan:
    """Reading files of ``snapshot``'s table with ``columns`` (all when None) as that version's types; with
    ``tracking``, each row also carries its stable row id (`ROW_ID`); with ``change_type``, its Change Data
    Feed kind (`CHANGE_TYPE`, for change data files)."""

    def __init__(
        self,
        snapshot: Snapshot,
        columns: Sequence[str] | None = None,
        tracking: RowTracking | None = None,
        change_type: bool = False,
    ) -> None:
        snapshot.check_readable()
        self.snapshot = snapshot
        self.columns = list(columns) if columns is not None else list(snapshot.schema.names)
        self.tracking = tracking
        self.change_type = change_type
        inside = nested_variants(snapshot.delta_schema)
        nested = [name for name in self.columns if name in inside]
        if nested:
            raise UnsupportedTableFeatureError(
                f"The Delta table {snapshot.uri} holds a VARIANT inside the column(s) {', '.join(nested)}, which is "
                f"read only as a top-level column (as Spark's path stores it); leave the column(s) out with "
                f"columns=[...], or convert it with to_json first."
            )
        self.variants = variant_columns(snapshot.delta_schema)
        fields = [snapshot.schema.field(name) for name in self.columns]
        if tracking is not None:
            fields.append(pa.field(ROW_ID, pa.int64(), nullable=False))
        if change_type:
            fields.append(pa.field(CHANGE_TYPE, pa.string()))
        self.schema = pa.schema(fields)

    def empty(self) -> pa.Table:
        return self.schema.empty_table()

    def rows(self, actions: Sequence[tuple[FileAction, int]]) -> pa.Table:
        """The rows of the files ``actions`` name, each with the version that added or removed it (named when the
        file is gone)."""
        parts: list[pa.RecordBatch] = []
        for action, version in actions:
            try:
                parts.extend(self.file_batches(action))
            except FileNotFoundError as err:
                raise HistoryUnavailableError(
                    f"a data file that version {version} of {self.snapshot.uri} added or removed is gone (removed "
                    f"by VACUUM): {first_line(err)}",
                    version,
                ) from None
        return pa.Table.from_batches(parts, schema=self.schema)

    def batches(self, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """Every row of the pinned version, file by file (a file gone is `HistoryUnavailableError`)."""
        for action in self.snapshot.files():
            try:
                yield from self.file_batches(action, batch_rows)
            except FileNotFoundError as err:
                raise HistoryUnavailableError(
                    f"version {self.snapshot.version} of {self.snapshot.uri} cannot be read whole any more: a data "
                    f"file is gone ({first_line(err)})",
                    self.snapshot.version,
                ) from None

    def file_batches(self, action: FileAction, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """One file's rows in file order, as batches of `schema` (see the module docstring)."""
        snapshot = self.snapshot
        path = snapshot.data_path(action.path)
        # The reader is closed here, also on an error: a traceback that kept it alive until the interpreter's exit
        # would have Arrow's native objects torn down after its thread pools.
        with snapshot.filesystem.open_input_file(path) as handle, pq.ParquetFile(handle, **PARQUET_OPTIONS) as parquet:
            yield from self.parquet_batches(action, parquet, batch_rows)

    def parquet_batches(
        self,
        action: FileAction,
        parquet: pq.ParquetFile,
        batch_rows: int = BATCH_ROWS,
        row_groups: Sequence[int] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """`file_batches` of the file ``action`` names, opened by the caller (a copy of it, say) as ``parquet`` with
        `PARQUET_OPTIONS`; with ``row_groups``, only those row groups' rows (a stream over the table decodes one at a
        time)."""
        snapshot, mapping = self.snapshot, self.snapshot.mapping
        stored = parquet.schema_arrow
        legacy = legacy_calendar(parquet.metadata.metadata)
        constants: dict[str, Any] = {}
        read: dict[str, str] = {}  # logical -> the file's column
        for name in self.columns:
            physical = mapping.physical_name(name)
            values = action.partition_values
            if values is not None and (physical in values or name in values):
                constants[name] = values.get(physical, values.get(name))
            elif values is None and name in snapshot.partition_columns:
                raise FilesNotReadableError(f"the log gives no partition values for {action.path}")
            else:
                found = mapping.in_file(name, stored)
                if found is not None:
                    read[name] = found
        hidden = None
        if self.tracking is not None and self.tracking.materialized in stored.names:
            hidden = self.tracking.materialized
        wanted = sorted({*read.values(), *([hidden] if hidden else []), *([CHANGE_TYPE] if self.change_type else [])})
        footer = parquet.metadata
        deleted = None
        if action.vector is not None:
            where = f"{snapshot.uri}/{action.path}"
            deleted = deleted_positions(action.vector, footer.num_rows, snapshot.filesystem, where)
        firsts = np.cumsum([0] + [footer.row_group(group).num_rows for group in range(footer.num_row_groups)])
        groups = range(footer.num_row_groups) if row_groups is None else row_groups
        for group in groups:
            start = int(firsts[group])
            batches = _file_batches(parquet, wanted, batch_rows, group)
            try:
                for batch in batches:
                    count = batch.num_rows
                    arrays = []
                    for name in self.columns:
                        field = snapshot.schema.field(name)
                        if name in constants:
                            arrays.append(_constant(constants[name], field.type, count))
                        elif name in read:
                            where = f"column {name!r} of {snapshot.uri}/{action.path}"
                            column = batch.column(read[name])
                            if name in self.variants:
                                arrays.append(json_texts(column, where))
                                continue
                            if legacy:
                                check_proleptic(column, where)
                            arrays.append(_logical(column, mapping.stored_type(name, field.type), field.type, where))
                        else:
                            arrays.append(pa.nulls(count, field.type))
                    if self.tracking is not None:
                        materialized = batch.column(hidden) if hidden else None
                        try:
                            arrays.append(stable_row_ids(count, _shifted(action, start), materialized))
                        except RowIdsUnavailableError:
                            raise RowIdsUnavailableError(
                                f"{snapshot.uri}: the log gives no baseRowId for {action.path}"
                            ) from None
                    if self.change_type:
                        arrays.append(batch.column(CHANGE_TYPE).cast(pa.string()))
                    out = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
                    if deleted is not None:
                        kept = np.ones(count, dtype=bool)
                        inside = deleted[(deleted >= start) & (deleted < start + count)]
                        kept[inside - start] = False
                        out = out.filter(pa.array(kept))
                    start += count
                    yield out
            finally:
                batches.close()


def snapshot_rows(snapshot: Snapshot, columns: Sequence[str] | None = None) -> pa.Table:
    """Every row of the pinned version with ``columns`` (all by default)."""
    scan = Scan(snapshot, columns)
    return pa.Table.from_batches(list(scan.batches()), schema=scan.schema)


def snapshot_batches(snapshot: Snapshot, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Every row of the pinned version, as record batches of at most ``batch_rows`` rows."""
    yield from Scan(snapshot).batches(batch_rows)


def _file_batches(
    parquet: pq.ParquetFile, columns: list[str], batch_rows: int, group: int
) -> Generator[pa.RecordBatch, None, None]:
    """A row group's ``columns`` in batches; where none of its columns are asked for, batches of its row count."""
    if columns:
        yield from parquet.iter_batches(batch_size=batch_rows, row_groups=[group], columns=columns, use_threads=False)
        return
    left = parquet.metadata.row_group(group).num_rows
    while left > 0:
        count = min(left, batch_rows)
        yield pa.RecordBatch.from_arrays([pa.nulls(count, pa.null())], names=["_rows"])
        left -= count


def _logical(column: pa.Array, stored_type: pa.DataType, logical_type: pa.DataType, where: str) -> pa.Array:
    """A file's column as the logical type: widened to the table's type in the stored layout (an older file's
    narrower type, a timestamp of another unit: `streaming.delta.widening`), then viewed under the logical names."""
    column = widened(column, stored_type, where)
    return column if stored_type == logical_type else column.view(logical_type)


def _constant(text: str | None, data_type: pa.DataType, count: int) -> pa.Array:
    """A partition value, as the log writes it (text; empty or missing is NULL), repeated ``count`` times."""
    if not text:
        return pa.nulls(count, data_type)
    return pa.repeat(_partition_scalar(text, data_type), count) if count else pa.array([], data_type)


def _partition_scalar(text: str, data_type: pa.DataType) -> pa.Scalar:
    """A partition value as the Delta log writes it (text) in the column's type."""
    if pa.types.is_timestamp(data_type):
        plain = pa.scalar(text.replace("T", " ").rstrip("Z")).cast(pa.timestamp("us"))
        if data_type.tz is None:
            return plain.cast(data_type)
        return pa.scalar(plain.value, pa.timestamp("us", tz="UTC")).cast(data_type)
    if pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return pa.scalar(text.encode("utf-8"), data_type)
    return pa.scalar(text).cast(data_type)


def _shifted(action: FileAction, start: int) -> FileAction:
    """``action`` as seen from its row ``start``: default row ids continue from there."""
    if action.base_row_id is None or start == 0:
        return action
    from dataclasses import replace

    return replace(action, base_row_id=action.base_row_id + start)
