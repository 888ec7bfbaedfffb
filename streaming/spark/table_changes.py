"""Spark's own Delta reader for the incremental job (`streaming.incremental.reader`): rows are DataFrames throughout.

A Delta table given by name (a Databricks runtime, a Unity Catalog table), or by path where Spark has Delta
support, is read with Spark: its history comes from ``DESCRIBE HISTORY``, which has no file actions, so the changed
files are the two versions' ``inputFiles()`` set against each other and their rows are read through the
``_metadata.file_path`` column (`streaming.spark.delta_file_paths`: the two spellings of a path, and the versions
whose deletion vectors a diff of paths cannot see, which are read whole). A table with row tracking gives each
row's stable id as ``_metadata.row_id`` (`SparkRowTrackedChanges`). Row identities and key digests are computed
per Arrow batch on the executors, and new rows are written by a Spark job (``dataframe_to_mds``). `choose_reader`
picks between this reader and delta-rs's (`streaming.incremental.deltalake_reader`) for a run, without reading a
row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from streaming.convert.driver import ConversionResult
from streaming.convert.row_identity import row_identities
from streaming.delta.errors import FilesNotReadableError, HistoryUnavailableError
from streaming.delta.history import (
    CDF_PROPERTY,
    TableWindow,
    feed_at_version,
    history_commit,
    touches_feed,
)
from streaming.delta.location import looks_like_path
from streaming.delta.row_ids import ROW_ID, TRACKING_PROPERTY
from streaming.incremental.deltalake_reader import DeltaLakeChoice
from streaming.incremental.reader import Columns, KeyValues, ReaderChoice, TableReader
from streaming.spark.convert import dataframe_to_mds
from streaming.spark.delta_file_paths import input_path_key, metadata_path_key, versions_changed_in_place
from streaming.spark.executor_access import check_executor_access
from streaming.spark.schema import resolve_columns
from streaming.spark.table_input import (
    active_session,
    latest_version,
    quote_table_name,
    spark_reads_delta,
    sql_identifier,
)
from streaming.storage.table_files import refuse_links_in

IDENTITY = "_mds_identity"
_COPY = "_mds_copy"
#: The error classes (conditions) with which Spark and Delta Lake say that a table version or a data file is gone:
#: time travel past log cleanup, a file VACUUM removed, a change data file gone, a window with a hole.
GONE_CONDITIONS = frozenset(
    {
        "DELTA_VERSION_NOT_FOUND",
        "DELTA_VERSIONS_NOT_CONTIGUOUS",
        "DELTA_FILE_NOT_FOUND",
        "DELTA_FILE_NOT_FOUND_DETAILED",
        "DELTA_LOG_FILE_NOT_FOUND",
        "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
        "DELTA_FILE_OR_DIR_NOT_FOUND",
        "FAILED_READ_FILE.FILE_NOT_EXIST",
        "PATH_NOT_FOUND",
    }
)
#: Java types a failed Spark job's causes are read as "a file is gone" by (a job's failure carries no class).
_GONE_JAVA_TYPES = frozenset({"java.io.FileNotFoundException"})


def choose_reader(spark: Any, table: str) -> ReaderChoice:
    """Spark's reader with ``spark`` (default: the active session), or delta-rs's for a Delta path where Spark has no
    Delta support or no session runs; decided without reading a row."""
    session = spark if spark is not None else running_session()
    if looks_like_path(table) and (session is None or not spark_reads_delta(session, table)):
        return DeltaLakeChoice()
    return SparkChoice(active_session(session))  # a table name needs Spark: this names the missing session


def running_session() -> Any:
    """The active SparkSession, or None when there is none (or pyspark is not installed)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()


class SparkChoice:
    """Read with Spark's Delta reader in ``session``; Spark's tasks write the shards, so they must reach them."""

    reader = "spark"
    resyncs_mirror = False  # a table by name cannot be read by delta-rs, whose rows a resync compares

    def __init__(self, session: Any) -> None:
        self.session = session

    def check_destination(self, url: str, executor_env: Mapping[str, str] | None) -> None:
        check_executor_access(url, executor_env, self.session)

    def open(self, table: str, version: int | None) -> TableReader:
        if looks_like_path(table):
            refuse_links_in(table)  # the JVM opens the table's files by path, following links
        latest = latest_version(self.session, sql_identifier(table))
        if latest is None:
            raise ValueError(
                f"{table!r} is not a Delta table, so it has no versions to convert incrementally. "
                f"Choices: a Delta table, or dataframe_to_mds({table!r}, out, mode='overwrite') to "
                f"convert it whole."
            )
        return SparkDeltaChanges(self.session, table, latest if version is None else version)


class SparkDeltaChanges:
    """A Delta table (name or path) read with Spark's Delta reader; rows are DataFrames throughout."""

    reader = "spark"
    row_ids = False
    no_row_ids = "this table has no Delta row tracking (delta.enableRowTracking), so it has no row ids"

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

    def encodings(self, chosen: Columns) -> dict[str, str]:
        """``{name: encoding}`` for the ``columns`` argument ``chosen`` (every column when None), checked."""
        return resolve_columns(self.at(self.version).schema, chosen)

    def version_rows(self) -> Any:
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

    def feed(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        with gone_as_history(self.table, window.start + 1):
            return self._feed(window, columns)

    def _feed(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        reader = (
            self.session.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", window.start + 1)
            .option("endingVersion", window.end)
        )
        changes = reader.load(self.table) if looks_like_path(self.table) else reader.table(quote_table_name(self.table))
        changes.schema  # noqa: B018 - resolves the feed now, so a range the feed does not cover fails here
        names = [f"`{name}`" for name in columns]
        plus = changes.where("_change_type IN ('insert', 'update_postimage')").selectExpr(*names)
        minus = changes.where("_change_type IN ('delete', 'update_preimage')").selectExpr(*names)
        return plus, minus

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        self.check_paths_show(window)
        with gone_as_history(self.table, window.start + 1):
            old, new = self.at(window.start), self.at(self.version)
            old_files, new_files = set(old.inputFiles()), set(new.inputFiles())
        return (
            rows_in_files(new, sorted(new_files - old_files), columns),
            rows_in_files(old, sorted(old_files - new_files), columns),
        )

    def check_paths_show(self, window: TableWindow) -> None:
        """Raise `FilesNotReadableError` when a diff of the window's file paths would miss a change (see `window`)."""
        in_place = sorted(self._in_place & set(range(window.start + 1, window.end + 1)))
        if in_place:
            raise FilesNotReadableError(f"version {in_place[0]} changed rows inside files it kept (deletion vectors)")

    def full(self, start: int, columns: Sequence[str]) -> tuple[Any, Any]:
        self.check_listed(start)
        names = [f"`{name}`" for name in columns]
        with gone_as_history(self.table, start + 1):
            return self.at(self.version).selectExpr(*names), self.at(start).selectExpr(*names)

    def check_listed(self, version: int) -> None:
        """Raise `HistoryUnavailableError` when ``DESCRIBE HISTORY`` no longer lists ``version``: time travel to it
        would fail, and Delta 3.x on pyspark 3.5 says so in words only (no error class reaches Python)."""
        rows = self.session.sql(f"DESCRIBE HISTORY {sql_identifier(self.table)}").select("version").collect()
        if version not in {int(row["version"]) for row in rows}:
            raise HistoryUnavailableError(
                f"DESCRIBE HISTORY of {self.table} no longer lists version {version} (older than the table's "
                f"delta.logRetentionDuration), so it cannot be read whole",
                version + 1,
            )

    def net(self, plus: Any, minus: Any, encodings: Mapping[str, str]) -> tuple[Any, int]:
        with gone_as_history(self.table, None):  # the count runs the job that reads the change's files
            return spark_net_change(plus, minus, encodings)

    def net_rows(self, plus: Any, minus: Any, encodings: Mapping[str, str]) -> tuple[Any, Any]:
        return spark_net_rows(plus, minus, encodings)

    def subtract(self, stored: Counter, columns: Sequence[str], encodings: Mapping[str, str]) -> Any:
        rows = self.version_rows().selectExpr(*[f"`{n}`" for n in columns])
        return spark_subtract(self.session, rows, stored, encodings)

    def resync_mirror(
        self, stored: Iterable[tuple[bytes, bytes]], columns: Sequence[str], encodings: Mapping[str, str]
    ) -> tuple[Any, list[bytes]]:
        raise ValueError(f"resync=True with mode='mirror' reads {self.table!r} with delta-rs only.")

    def key_digests(self, rows: Any, key: Mapping[str, str]) -> tuple[list[bytes], KeyValues]:
        """The digests are computed on the executors; only the key columns come to the driver."""
        names = list(key)
        with gone_as_history(self.table, None):  # the collect runs the job that reads the change's files
            collected = with_identity(rows.selectExpr(*[f"`{name}`" for name in names]), key).collect()
        values = [{name: row[name] for name in names} for row in collected]
        return [bytes(row[IDENTITY]) for row in collected], lambda chosen: [values[index] for index in chosen]

    def with_row_ids(self) -> TableReader | None:
        rows = self.session.sql(f"SHOW TBLPROPERTIES {sql_identifier(self.table)}").collect()
        tracked = any(row["key"] == TRACKING_PROPERTY and str(row["value"]).strip().lower() == "true" for row in rows)
        return SparkRowTrackedChanges(self.session, self.table, self.version) if tracked else None

    def write(self, rows: Any, out: str, **options: Any) -> ConversionResult:
        """Convert the DataFrame ``rows`` into the dataset folder ``out`` with ``dataframe_to_mds``."""
        return dataframe_to_mds(rows, out, spark=self.session, **options)

    def _feed_property_now(self) -> bool:
        rows = self.session.sql(f"SHOW TBLPROPERTIES {sql_identifier(self.table)}").collect()
        return any(row["key"] == CDF_PROPERTY and str(row["value"]).strip().lower() == "true" for row in rows)


@contextmanager
def gone_as_history(table: str, version: int | None) -> Iterator[None]:
    """Turn Spark's "gone" (a version or a data file of ``table``) into `HistoryUnavailableError` naming ``version``
    (None: a version of the change, where the failed job does not say which); any other error passes."""
    try:
        yield
    except HistoryUnavailableError:
        raise
    except Exception as err:
        if not spark_says_gone(err):
            raise
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise HistoryUnavailableError(f"Spark cannot read {table} any more: {text}", version) from err


def spark_says_gone(err: BaseException) -> bool:
    """Whether a Spark error says a table version or a data file is gone: by its error class (`GONE_CONDITIONS`,
    through pyspark's ``getCondition``/``getErrorClass``, classic and Connect alike), or, for a failed job, which
    pyspark hands over unconverted (a ``Py4JJavaError``), by the classes and Java types of its causes."""
    if _condition(err) in GONE_CONDITIONS:
        return True
    throwable = getattr(err, "java_exception", None)
    seen = 0
    while throwable is not None and seen < 16:  # a cause chain is short; a cycle must not hang the job
        if _java_types(throwable) & _GONE_JAVA_TYPES:
            return True
        loader = throwable.getClass().getClassLoader()  # Spark's classes have one (Java's own have none)
        if loader is not None and loader.loadClass("org.apache.spark.SparkThrowable").isInstance(throwable):
            if throwable.getErrorClass() in GONE_CONDITIONS:
                return True
        throwable, seen = throwable.getCause(), seen + 1
    return False


def _java_types(throwable: Any) -> set[str]:
    """The Java classes a throwable is an instance of (its class and its superclasses), by their names."""
    names, kind = set(), throwable.getClass()
    while kind is not None:
        names.add(kind.getName())
        kind = kind.getSuperclass()
    return names


def _condition(err: BaseException) -> str | None:
    """A pyspark exception's error class (``getCondition`` from pyspark 4, ``getErrorClass`` before)."""
    for name in ("getCondition", "getErrorClass"):
        method = getattr(err, name, None)
        if callable(method):
            try:
                return method()
            except Exception:  # noqa: BLE001 - no class to give (a JVM gone, a message without one)
                return None
    return None


def rows_in_files(frame: Any, files: Sequence[str], columns: Sequence[str]) -> Any:
    """The rows of ``frame`` (a file-based DataFrame) that lie in ``files`` (as ``inputFiles()`` names them)."""
    from pyspark.sql import functions as F

    names = [F.col(f"`{name}`") for name in columns]
    if not files:
        return frame.select(*names).limit(0)
    wanted = [input_path_key(path) for path in files]
    return frame.where(metadata_path_key(F.col("_metadata.file_path")).isin(wanted)).select(*names)


class SparkRowTrackedChanges(SparkDeltaChanges):
    """`SparkDeltaChanges` whose rows carry their stable row id in the column `ROW_ID`.

    What a mirror keyed by row ids reads when the table is given by name (a Unity Catalog table cannot be read by
    path): Delta Lake's reader exposes each row's stable id as ``_metadata.row_id`` once ``delta.enableRowTracking``
    is on, and keeps it through ``UPDATE``, ``MERGE``, ``OPTIMIZE`` and ``RESTORE``, as delta-rs's reader
    (`streaming.incremental.deltalake_reader.RowTrackedChanges`) gives it from the log. The Change Data Feed carries
    no row ids, so `feed` refuses and the changed files (or both versions whole) are read. ``_metadata`` is only
    reachable on the table's own relation, so every read selects it there, before any projection.
    """

    row_ids = True

    def __init__(self, session: Any, table: str, version: int) -> None:
        super().__init__(session, table, version)
        if ROW_ID in super().column_names():
            raise ValueError(
                f"{table!r} has a column named {ROW_ID!r}, where a mirror keyed by row ids stores each row's id. "
                f"Choices: key=[...] (columns that identify a row), or rename that column."
            )

    def column_names(self) -> list[str]:
        return [*super().column_names(), ROW_ID]

    def encodings(self, chosen: Columns) -> dict[str, str]:
        """The columns' encodings (every column when None), always with `ROW_ID`: the key is stored."""
        if isinstance(chosen, Mapping):
            chosen = {name: encoding for name, encoding in chosen.items() if name != ROW_ID}
        elif chosen is not None:
            chosen = [name for name in chosen if name != ROW_ID]
        return {**super().encodings(chosen), ROW_ID: "int64"}

    def version_rows(self) -> Any:
        return self._with_ids(self.at(self.version), self.column_names())

    def feed(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        raise FilesNotReadableError("the Change Data Feed has no row ids")

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        from pyspark.sql import functions as F

        self.check_paths_show(window)
        old, new = self.at(window.start), self.at(self.version)
        old_files, new_files = set(old.inputFiles()), set(new.inputFiles())

        def rows_in(frame: Any, files: set[str]) -> Any:
            wanted = [input_path_key(path) for path in sorted(files)]
            key = metadata_path_key(F.col("_metadata.file_path"))
            return self._with_ids(frame.where(key.isin(wanted)) if wanted else frame.limit(0), columns)

        return rows_in(new, new_files - old_files), rows_in(old, old_files - new_files)

    def full(self, start: int, columns: Sequence[str]) -> tuple[Any, Any]:
        return self._with_ids(self.at(self.version), columns), self._with_ids(self.at(start), columns)

    def subtract(self, stored: Counter, columns: Sequence[str], encodings: Mapping[str, str]) -> Any:
        raise ValueError(f"resync=True reads {self.table!r} with delta-rs only (a mirror keyed by row ids by name).")

    def with_row_ids(self) -> TableReader | None:
        return self

    @staticmethod
    def _with_ids(frame: Any, columns: Sequence[str]) -> Any:
        """``columns`` of ``frame`` (the table's relation), `ROW_ID` taken from ``_metadata.row_id``."""
        from pyspark.sql import functions as F

        return frame.select(
            *[F.col("_metadata.row_id").alias(ROW_ID) if name == ROW_ID else F.col(f"`{name}`") for name in columns]
        )


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
