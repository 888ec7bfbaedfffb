"""A Delta table with row tracking read by Spark's own Delta reader, each row with its stable row id.

What a mirror keyed by row ids reads when the table is given by name (a Unity Catalog table cannot be read by path):
Delta Lake's reader exposes each row's stable id as ``_metadata.row_id`` once ``delta.enableRowTracking`` is on,
and keeps it through ``UPDATE``, ``MERGE``, ``OPTIMIZE`` and ``RESTORE``. Here it becomes the column `ROW_ID`
(``_row_id``), as the delta-rs reader (`streaming.spark.table_changes.RowTrackedChanges`) gives it from the log.

The Change Data Feed carries no row ids, so `feed` refuses and the changed files (or both versions whole) are read.
``_metadata`` is only reachable on the table's own relation, so every read selects it there, before any projection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streaming.convert.delta_history import TableWindow
from streaming.convert.delta_row_ids import ROW_ID, TRACKING_PROPERTY
from streaming.convert.delta_table import FilesNotReadable
from streaming.spark.delta_file_paths import input_path_key, metadata_path_key
from streaming.spark.table_changes import SparkDeltaChanges
from streaming.spark.table_input import sql_identifier


def spark_tracks_rows(session: Any, table: str) -> bool:
    """Whether ``table`` has Delta row tracking on (its ``delta.enableRowTracking`` property), read with Spark."""
    rows = session.sql(f"SHOW TBLPROPERTIES {sql_identifier(table)}").collect()
    return any(row["key"] == TRACKING_PROPERTY and str(row["value"]).strip().lower() == "true" for row in rows)


class SparkRowTrackedChanges(SparkDeltaChanges):
    """`SparkDeltaChanges` whose rows carry their stable row id in the column `ROW_ID`."""

    def __init__(self, session: Any, table: str, version: int) -> None:
        super().__init__(session, table, version)
        if ROW_ID in super().column_names():
            raise ValueError(
                f"{table!r} has a column named {ROW_ID!r}, where a mirror keyed by row ids stores each row's id. "
                f"Choices: key=[...] (columns that identify a row), or rename that column."
            )

    def column_names(self) -> list[str]:
        return [*super().column_names(), ROW_ID]

    def plan(self, chosen: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
        """The columns' encodings (every column when None), always with `ROW_ID`: the key is stored."""
        if isinstance(chosen, Mapping):
            chosen = {name: encoding for name, encoding in chosen.items() if name != ROW_ID}
        elif chosen is not None:
            chosen = [name for name in chosen if name != ROW_ID]
        return {**super().plan(chosen), ROW_ID: "int64"}

    def snapshot(self) -> Any:
        return self._with_ids(self.at(self.version), self.column_names())

    def feed(self, start: int, columns: Sequence[str]) -> tuple[Any, Any]:
        raise FilesNotReadable("the Change Data Feed has no row ids")

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

    def subtract(self, held: Any, columns: Sequence[str], encodings: Mapping[str, str]) -> Any:
        raise ValueError(f"resync=True reads {self.table!r} with delta-rs only (a mirror keyed by row ids by name).")

    @staticmethod
    def _with_ids(frame: Any, columns: Sequence[str]) -> Any:
        """``columns`` of ``frame`` (the table's relation), `ROW_ID` taken from ``_metadata.row_id``."""
        from pyspark.sql import functions as F

        return frame.select(
            *[F.col("_metadata.row_id").alias(ROW_ID) if name == ROW_ID else F.col(f"`{name}`") for name in columns]
        )
