"""Where the incremental job reads a Delta table's changes from: delta-rs (as Arrow) or Spark's own Delta reader.

Both readers offer the same reads, so the job (`streaming.spark.incremental`) decides what to read once:

* ``snapshot``: every row of the pinned version (the first run);
* ``window``: the history of versions ``start + 1 ..`` the pinned one (`streaming.convert.delta_history`);
* ``feed``: the Change Data Feed of the window, as the rows it adds and the rows it takes away;
* ``files``: the rows of the data files the window added and removed (a diff that reads what changed);
* ``full``: both snapshots whole (when the changed files cannot be read one by one);
* ``net``/``subtract``: the multiset difference by row identity (`streaming.convert.row_identity`), as a
  DataFrame for the conversion.

`DeltaLakeChanges` reads a Delta path with delta-rs (where Spark has no Delta support, a plain ``pip install
pyspark``, or no SparkSession at all): its history comes from the table's commit files, with every file action,
and its rows never leave the driver: they are written here (`streaming.convert.table_engine`). `SparkDeltaChanges`
reads with Spark (a Databricks runtime, a table name): its history comes from ``DESCRIBE HISTORY``, which has
no file actions, so the changed files are the two versions' ``inputFiles()`` set against each other and their
rows are read through the ``_metadata.file_path`` column (`streaming.spark.delta_file_paths`: the two spellings of
a path, and the versions whose deletion vectors a diff of paths cannot see, which are read whole).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from streaming.convert.delta_history import (
    CDF_PROPERTY,
    HistoryUnavailableError,
    TableWindow,
    feed_at_version,
    history_commit,
    touches_feed,
)
from streaming.convert.delta_row_ids import ROW_ID, RowTracking
from streaming.convert.delta_table import DeltaLakeTable, FilesNotReadable
from streaming.convert.driver import ConversionResult
from streaming.convert.row_identity import net_change, row_identities, subtract_identities
from streaming.convert.source import Source
from streaming.convert.table_engine import convert_table
from streaming.convert.type_rules import resolve_columns as arrow_resolve_columns
from streaming.spark.convert import dataframe_to_mds
from streaming.spark.delta_file_paths import input_path_key, metadata_path_key, versions_changed_in_place
from streaming.spark.schema import resolve_columns as spark_resolve_columns
from streaming.spark.table_input import looks_like_path, quote_table_name, sql_identifier

IDENTITY = "_mds_identity"
_COPY = "_mds_copy"


class DeltaLakeChanges:
    """A Delta path read with delta-rs; rows stay Arrow tables on the driver and are written from here
    (`streaming.convert.table_engine`): no Spark job at all."""

    reader = "deltalake"

    def __init__(self, table: str, version: int | None) -> None:
        self.table = table
        self.delta = DeltaLakeTable(table, version)
        self.version = self.delta.version

    def column_names(self) -> list[str]:
        return list(self.delta.schema.names)

    def plan(self, chosen: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
        """``{name: encoding}`` for the ``columns`` argument ``chosen`` (every column when None), checked."""
        schema = self.delta.schema
        return arrow_resolve_columns(list(zip(schema.names, schema.types)), chosen)

    def snapshot(self) -> pa.Table:
        return self.delta.snapshot()

    def window(self, start: int) -> TableWindow:
        return self.delta.window(start)

    def feed(self, start: int, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        return self.delta.feed(start, columns)

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        added, removed = window.changed_files()
        empty = self.delta.schema.empty_table().select(list(columns))
        plus = self.delta.files(added, columns) if added else empty
        minus = self.delta.files(removed, columns) if removed else empty
        return plus, minus

    def rows(self, columns: Sequence[str], version: int | None = None) -> pa.Table:
        """Every row of ``version`` (the pinned one by default) with ``columns``."""
        return self.delta.snapshot(version, columns)

    def full(self, start: int, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        try:
            return self.rows(columns), self.rows(columns, start)
        except FileNotFoundError as err:
            raise HistoryUnavailableError(
                f"version {start} of {self.table} cannot be read whole any more ({str(err).splitlines()[0]})", start
            ) from None

    def net(self, plus: pa.Table, minus: pa.Table, encodings: Mapping[str, str]) -> tuple[pa.Table | None, int]:
        added, removed = net_change(plus, minus, encodings)
        return (added if added.num_rows else None), removed

    def subtract(self, held: Counter, columns: Sequence[str], encodings: Mapping[str, str]) -> pa.Table | None:
        rows = subtract_identities(self.rows(columns), held, encodings)
        return rows if rows.num_rows else None

    def write(self, rows: pa.Table, out: str, **options: Any) -> ConversionResult:
        """Convert ``rows`` into the dataset folder ``out`` (``dataframe_to_mds``'s options that apply)."""
        for unused in ("spark", "progress", "executor_env"):
            options.pop(unused, None)
        source = Source("delta", self.table, self.version, self.reader)
        return convert_table(rows, out, source=source, caller="incremental_to_mds", **options)


class RowTrackedChanges(DeltaLakeChanges):
    """A Delta path with row tracking, read with delta-rs, whose rows carry their stable row id as one more
    column (`ROW_ID`, from `streaming.convert.delta_row_ids`): what a mirror keyed by row ids reads.

    Its reads are the snapshot, the changed files and both versions whole; the Change Data Feed has no row ids
    (the Delta protocol's readers cannot take them from change data files), so `feed` refuses."""

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

    def plan(self, chosen: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
        """The columns' encodings (every column when None), always with `ROW_ID`: the key is stored."""
        if isinstance(chosen, Mapping):
            chosen = {name: encoding for name, encoding in chosen.items() if name != ROW_ID}
        elif chosen is not None:
            chosen = [name for name in chosen if name != ROW_ID]
        return {**super().plan(chosen), ROW_ID: "int64"}

    def snapshot(self) -> pa.Table:
        return self.rows(self.column_names())

    def feed(self, start: int, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        raise FilesNotReadable("the Change Data Feed has no row ids")

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        added, removed = window.changed_files()
        values = [name for name in columns if name != ROW_ID]
        return (
            self.delta.files(added, values, self.tracking).select(list(columns)),
            self.delta.files(removed, values, self.tracking).select(list(columns)),
        )

    def rows(self, columns: Sequence[str], version: int | None = None) -> pa.Table:
        values = [name for name in columns if name != ROW_ID]
        return self.delta.tracked_snapshot(version, values, self.tracking).select(list(columns))


class SparkDeltaChanges:
    """A Delta table (name or path) read with Spark's Delta reader; rows are DataFrames throughout."""

    reader = "spark"

    def __init__(self, session: Any, table: str, version: int) -> None:
        self.session = session
        self.table = table
        self.version = version
        self._in_place: set[int] = set()  # versions a diff of file paths cannot see (`window` reads them)

    def at(self, version: int) -> Any:
        reader = self.session.read.format("delta").option("versionAsOf", version)
        return reader.load(self.table) if looks_like_path(self.table) else reader.table(quote_table_name(self.table))

    def column_names(self) -> list[str]:
        return [item.name for item in self.at(self.version).schema.fields]

    def plan(self, chosen: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
        """``{name: encoding}`` for the ``columns`` argument ``chosen`` (every column when None), checked."""
        return spark_resolve_columns(self.at(self.version).schema, chosen)

    def snapshot(self) -> Any:
        return self.at(self.version)

    def window(self, start: int) -> TableWindow:
        rows = self.session.sql(f"DESCRIBE HISTORY {sql_identifier(self.table)}").collect()
        self._in_place = versions_changed_in_place(rows)
        history = [history_commit(row["version"], row["operation"], row["operationParameters"]) for row in rows]
        by_version = {commit.version: commit for commit in history}
        missing = [version for version in range(start + 1, self.version + 1) if version not in by_version]
        if missing:
            raise HistoryUnavailableError(
                f"DESCRIBE HISTORY of {self.table} no longer lists version {missing[0]} (older than the table's "
                f"delta.logRetentionDuration)",
                missing[0],
            )
        commits = tuple(by_version[version] for version in range(start + 1, self.version + 1))
        enabled = feed_at_version(history, start)
        if enabled is None and not any(map(touches_feed, commits)):
            enabled = self._feed_property_now()  # nothing in the window changed it: today's value was its value
        return TableWindow(start, self.version, commits, enabled)

    def feed(self, start: int, columns: Sequence[str]) -> tuple[Any, Any]:
        reader = (
            self.session.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", start + 1)
            .option("endingVersion", self.version)
        )
        changes = reader.load(self.table) if looks_like_path(self.table) else reader.table(quote_table_name(self.table))
        changes.schema  # noqa: B018 - resolves the feed now, so a range the feed does not cover fails here
        names = [f"`{name}`" for name in columns]
        plus = changes.where("_change_type IN ('insert', 'update_postimage')").selectExpr(*names)
        minus = changes.where("_change_type IN ('delete', 'update_preimage')").selectExpr(*names)
        return plus, minus

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        self.check_paths_show(window)
        old, new = self.at(window.start), self.at(self.version)
        old_files, new_files = set(old.inputFiles()), set(new.inputFiles())
        return (
            rows_in_files(new, sorted(new_files - old_files), columns),
            rows_in_files(old, sorted(old_files - new_files), columns),
        )

    def check_paths_show(self, window: TableWindow) -> None:
        """Raise `FilesNotReadable` when a diff of the window's file paths would miss a change (see `window`)."""
        in_place = sorted(self._in_place & set(range(window.start + 1, window.end + 1)))
        if in_place:
            raise FilesNotReadable(f"version {in_place[0]} changed rows inside files it kept (deletion vectors)")

    def full(self, start: int, columns: Sequence[str]) -> tuple[Any, Any]:
        names = [f"`{name}`" for name in columns]
        return self.at(self.version).selectExpr(*names), self.at(start).selectExpr(*names)

    def net(self, plus: Any, minus: Any, encodings: Mapping[str, str]) -> tuple[Any, int]:
        return spark_net_change(plus, minus, encodings)

    def subtract(self, held: Counter, columns: Sequence[str], encodings: Mapping[str, str]) -> Any:
        return spark_subtract(self.session, self.snapshot().selectExpr(*[f"`{n}`" for n in columns]), held, encodings)

    def write(self, rows: Any, out: str, **options: Any) -> ConversionResult:
        """Convert the DataFrame ``rows`` into the dataset folder ``out`` with ``dataframe_to_mds``."""
        return dataframe_to_mds(rows, out, spark=self.session, **options)

    def _feed_property_now(self) -> bool:
        rows = self.session.sql(f"SHOW TBLPROPERTIES {sql_identifier(self.table)}").collect()
        return any(row["key"] == CDF_PROPERTY and str(row["value"]).strip().lower() == "true" for row in rows)


def rows_in_files(frame: Any, files: Sequence[str], columns: Sequence[str]) -> Any:
    """The rows of ``frame`` (a file-based DataFrame) that lie in ``files`` (as ``inputFiles()`` names them)."""
    from pyspark.sql import functions as F

    names = [F.col(f"`{name}`") for name in columns]
    if not files:
        return frame.select(*names).limit(0)
    wanted = [input_path_key(path) for path in files]
    return frame.where(metadata_path_key(F.col("_metadata.file_path")).isin(wanted)).select(*names)


def with_identity(frame: Any, encodings: Mapping[str, str]) -> Any:
    """``frame`` with an ``_mds_identity`` column: each row's identity (`row_identities`), computed per Arrow batch
    on the executors."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    chosen = dict(encodings)
    schema = StructType([*frame.schema.fields, StructField(IDENTITY, BinaryType(), False)])

    def identify(batches: Any) -> Any:
        for batch in batches:
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(row_identities(batch, chosen), pa.binary())],
                names=[*batch.schema.names, IDENTITY],
            )

    return frame.mapInArrow(identify, schema)


def spark_net_change(plus: Any, minus: Any, encodings: Mapping[str, str]) -> tuple[Any, int]:
    """`streaming.convert.row_identity.net_change` on DataFrames: the rows of ``plus`` no row of ``minus``
    cancels, and how many rows of ``minus`` no row of ``plus`` cancels."""
    added, removed = spark_net_rows(plus, minus, encodings)
    return added, removed.count()


def spark_net_rows(plus: Any, minus: Any, encodings: Mapping[str, str]) -> tuple[Any, Any]:
    """`streaming.convert.row_identity.net_rows` on DataFrames: the rows of ``plus`` no row of ``minus`` cancels
    and the rows of ``minus`` no row of ``plus`` cancels."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def numbered(frame: Any) -> Any:
        within = Window.partitionBy(IDENTITY).orderBy(F.lit(1))
        return with_identity(frame, encodings).withColumn(_COPY, F.row_number().over(within))

    keys = [IDENTITY, _COPY]
    new, old = numbered(plus), numbered(minus)
    added = new.join(old.select(*keys), keys, "left_anti").drop(*keys)
    return added, old.join(new.select(*keys), keys, "left_anti").drop(*keys)


def spark_subtract(session: Any, rows: Any, held: Counter, encodings: Mapping[str, str]) -> Any:
    """The rows of ``rows`` left after cancelling the multiset of identities ``held``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    schema = StructType([StructField(IDENTITY, BinaryType(), False), StructField("_mds_held", LongType(), False)])
    counts = session.createDataFrame([(bytes(key), int(count)) for key, count in held.items()], schema)
    within = Window.partitionBy(IDENTITY).orderBy(F.lit(1))
    numbered = with_identity(rows, encodings).withColumn(_COPY, F.row_number().over(within))
    joined = numbered.join(counts, IDENTITY, "left")
    left = joined.where(F.col("_mds_held").isNull() | (F.col(_COPY) > F.col("_mds_held")))
    return left.drop(IDENTITY, _COPY, "_mds_held")
