"""Every error the Delta package raises, in one place, each raised where its cause enters.

A reader turns its engine's "gone" into `HistoryUnavailableError` where it reads: delta-rs's own exception types
(`streaming.delta.snapshot`), a data file's open failing with `FileNotFoundError` (`streaming.delta.scan`, which
knows the version that named the file), Spark's error classes (`streaming.spark.table_changes`). Nothing above
decides by an exception's text.
"""

from __future__ import annotations


class HistoryUnavailableError(RuntimeError):
    """The changes of a version can no longer be read (its log entry or its files are gone, e.g. after VACUUM).

    Attributes:
        version: the table version whose changes are missing (None: one of the versions the failed read covered,
            where the engine does not say which, e.g. a Spark job whose input file is gone).
    """

    def __init__(self, message: str, version: int | None) -> None:
        super().__init__(message)
        self.version = version


class FilesNotReadableError(Exception):
    """A table's files cannot be read one by one here (files outside the table's folder, a log this package does
    not replay); the caller reads the change another way."""


class RowIdsUnavailableError(ValueError):
    """The table's row ids cannot be read here (the message says why and what to pass instead)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{why}. A mirror of this table then needs key=[...]: columns that identify a row.")


class UnsupportedTableFeatureError(ValueError):
    """A Delta table needs a reader feature this package cannot read without Spark (e.g. ``typeWidening``)."""


class DeletionVectorError(ValueError):
    """A deletion vector that cannot be read or does not hold what its descriptor says (a damaged table)."""


class DeltaLogError(ValueError):
    """A folder whose ``_delta_log`` is not a Delta table's, or a log that is damaged (the message says where)."""


class NoColumnsError(ValueError):
    """A Delta table whose schema has no columns: there is nothing to convert."""


class UnreadableValueError(ValueError):
    """A data file's column holds values this reader cannot give as Spark's reader does (the message names the
    file, the column and why)."""
