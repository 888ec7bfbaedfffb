"""delta-rs's reader of a Delta table for the incremental job: rows as Arrow tables that never leave the driver.

A Delta path is read this way where Spark has no Delta support (a plain ``pip install pyspark``) or no
SparkSession runs at all: its history comes from the table's commit files, with every file action
(`streaming.delta.changes_between`), the rows of changed files are read where they lie, one file at a time, with their
column mapping and deletion vectors applied (`streaming.delta.scan`), and the rows are written here
(`streaming.convert.table_engine`): no Spark job. `RowTrackedChanges` reads a table with Delta row tracking with
each row's stable row id
(`streaming.delta.row_ids`), what a mirror keyed by row ids reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from streaming.convert import key_map
from streaming.convert.driver import ConversionResult
from streaming.convert.row_identity import net_change, net_rows, row_identities, subtract_identities
from streaming.convert.source import Source
from streaming.convert.table_engine import convert_table
from streaming.convert.type_rules import resolve_columns
from streaming.delta.changes_between import changed_rows, feed_rows, read_window
from streaming.delta.errors import FilesNotReadableError, RowIdsUnavailableError
from streaming.delta.history import TableWindow
from streaming.delta.location import looks_like_path
from streaming.delta.row_ids import ROW_ID, RowTracking
from streaming.delta.scan import Scan
from streaming.delta.snapshot import Snapshot
from streaming.incremental.reader import Columns, KeyValues, TableReader


class DeltaLakeChoice:
    """Read with delta-rs: a Delta path only, written on the driver, so there are no executors to check."""

    reader = "deltalake"
    resyncs_mirror = True

    def check_destination(self, url: str, executor_env: Mapping[str, str] | None) -> None:
        return None

    def open(self, table: str, version: int | None) -> TableReader:
        if not looks_like_path(table):
            raise ValueError(
                f"{table!r} is a table name, which only Spark reads: streaming.spark.incremental_to_mds({table!r}, "
                f"out) with a SparkSession, or the table's storage path here."
            )
        return DeltaLakeChanges(table, version)


class DeltaLakeChanges:
    """A Delta path read with delta-rs; rows stay Arrow tables on the driver and are written from here
    (`streaming.convert.table_engine`): no Spark job at all."""

    reader = "deltalake"
    row_ids = False
    no_row_ids = "this table has no Delta row tracking (delta.enableRowTracking), so it has no row ids"

    def __init__(self, table: str, version: int | None) -> None:
        self.table = table
        self.delta = Snapshot.open(table, version)
        self.version = self.delta.version

    def column_names(self) -> list[str]:
        return list(self.delta.schema.names)

    def encodings(self, chosen: Columns) -> dict[str, str]:
        """``{name: encoding}`` for the ``columns`` argument ``chosen`` (every column when None), checked."""
        schema = self.delta.schema
        return resolve_columns(list(zip(schema.names, schema.types)), chosen)

    def version_rows(self) -> pa.Table:
        return self._rows(self.column_names())

    def window(self, start: int) -> TableWindow:
        return read_window(self.delta, start)

    def feed(self, window: TableWindow, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        """The feed's rows, refused (`FilesNotReadableError`) for a window that wrote deletion vectors: delta-rs's
        feed reader gave wrong rows for a DELETE made with them (the rows of another file's vector), and a window
        with them is read from its changed files, which apply each vector exactly."""
        with_vectors = [
            commit.version
            for commit in window.commits
            if any(action.deletion_vector and action.data_change for action in (*commit.adds, *commit.removes))
        ]
        if with_vectors:
            raise FilesNotReadableError(
                f"version {with_vectors[0]} of {self.table} wrote deletion vectors, whose changes delta-rs's "
                f"Change Data Feed reader gets wrong"
            )
        return feed_rows(self.delta, window, columns)

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        return changed_rows(self.delta, window, columns)

    def _rows(self, columns: Sequence[str], version: int | None = None) -> pa.Table:
        """Every row of ``version`` (the pinned one by default) with ``columns``, as the pinned version's types;
        a column an older version lacked is NULL there, as Delta reads it."""
        return self._version_rows(columns, version, None)

    def full(self, start: int, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        return self._rows(columns), self._rows(columns, start)

    def _version_rows(self, columns: Sequence[str], version: int | None, tracking: RowTracking | None) -> pa.Table:
        pinned = self.delta if version is None or version == self.version else Snapshot.open(self.table, version)
        have = [name for name in columns if name in pinned.schema.names]
        scan = Scan(pinned, have, tracking)
        rows = pa.Table.from_batches(list(scan.batches()), schema=scan.schema)
        target = self.delta.schema
        arrays = [
            rows.column(name).cast(target.field(name).type)
            if name in have
            else pa.nulls(rows.num_rows, target.field(name).type)
            for name in columns
        ]
        fields = [target.field(name) for name in columns]
        if tracking is not None:
            arrays.append(rows.column(ROW_ID))
            fields.append(pa.field(ROW_ID, pa.int64(), nullable=False))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    def net(self, plus: pa.Table, minus: pa.Table, encodings: Mapping[str, str]) -> tuple[pa.Table | None, int]:
        added, removed = net_change(plus, minus, encodings)
        return (added if added.num_rows else None), removed

    def net_rows(self, plus: pa.Table, minus: pa.Table, encodings: Mapping[str, str]) -> tuple[pa.Table, pa.Table]:
        return net_rows(plus, minus, encodings)

    def subtract(self, stored: Counter, columns: Sequence[str], encodings: Mapping[str, str]) -> pa.Table | None:
        rows = subtract_identities(self._rows(columns), stored, encodings)
        return rows if rows.num_rows else None

    def resync_mirror(
        self, stored: Iterable[tuple[bytes, bytes]], columns: Sequence[str], encodings: Mapping[str, str]
    ) -> tuple[pa.Table | None, list[bytes]]:
        rows = self._rows(columns)
        wanted = Counter(row_identities(rows, encodings))
        counted: Counter = Counter()
        taken = []
        for identity, digest in stored:
            counted[identity] += 1
            if wanted[identity]:
                wanted[identity] -= 1
            else:
                taken.append(digest)
        left = subtract_identities(rows, counted, encodings)
        return (left if left.num_rows else None), taken

    def key_digests(self, rows: pa.Table, key: Mapping[str, str]) -> tuple[list[bytes], KeyValues]:
        keys = rows.select(list(key))
        return key_map.key_digests(keys, key), lambda chosen: keys.take(pa.array(chosen, pa.int64())).to_pylist()

    def with_row_ids(self) -> TableReader | None:
        """This table read with its row ids, when it has Delta row tracking."""
        tracking = self.delta.row_tracking()
        return None if tracking is None else RowTrackedChanges(self.table, self.version, tracking)

    def write(self, rows: pa.Table, out: str, **options: Any) -> ConversionResult:
        """Convert ``rows`` into the dataset folder ``out`` (``dataframe_to_mds``'s options that apply)."""
        for unused in ("spark", "progress", "executor_env"):
            options.pop(unused, None)
        source = Source("delta", self.table, self.version, self.reader)
        return convert_table(rows, out, source=source, caller="incremental_to_mds", **options)


class RowTrackedChanges(DeltaLakeChanges):
    """A Delta path with row tracking, read with delta-rs, whose rows carry their stable row id as one more
    column (`ROW_ID`, from `streaming.delta.row_ids`): what a mirror keyed by row ids reads.

    Its reads are the snapshot, the changed files and both versions whole; the Change Data Feed has no row ids
    (the Delta protocol's readers cannot take them from change data files), so `feed` refuses."""

    row_ids = True

    def __init__(self, table: str, version: int | None, tracking: RowTracking) -> None:
        super().__init__(table, version)
        self.tracking = tracking
        if ROW_ID in self.delta.schema.names:
            raise ValueError(
                f"{table!r} has a column named {ROW_ID!r}, where a mirror keyed by row ids stores each row's id. "
                f"Choices: key=[...] (columns that identify a row), or rename that column."
            )

    def column_names(self) -> list[str]:
        return [*self.delta.schema.names, ROW_ID]

    def encodings(self, chosen: Columns) -> dict[str, str]:
        """The columns' encodings (every column when None), always with `ROW_ID`: the key is stored."""
        if isinstance(chosen, Mapping):
            chosen = {name: encoding for name, encoding in chosen.items() if name != ROW_ID}
        elif chosen is not None:
            chosen = [name for name in chosen if name != ROW_ID]
        return {**super().encodings(chosen), ROW_ID: "int64"}

    def feed(self, window: TableWindow, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        raise FilesNotReadableError("the Change Data Feed has no row ids")

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        values = [name for name in columns if name != ROW_ID]
        plus, minus = changed_rows(self.delta, window, values, self.tracking)
        return plus.select(list(columns)), minus.select(list(columns))

    def _rows(self, columns: Sequence[str], version: int | None = None) -> pa.Table:
        values = [name for name in columns if name != ROW_ID]
        try:
            return self._version_rows(values, version, self.tracking).select(list(columns))
        except FilesNotReadableError as err:
            number = self.version if version is None else version
            raise RowIdsUnavailableError(
                f"the row ids of version {number} of {self.table} cannot be read: {err}"
            ) from None

    def with_row_ids(self) -> TableReader | None:
        return self
