"""Reading a Parquet file that others can write, one row group at a time, each checked against its footer first.

A Parquet file states in its footer how many rows each row group holds and how many bytes its columns take
decompressed; a few KiB of identical rows can declare millions of them. `bounded_row_groups` refuses a row group
past the caller's bounds before any of it is decoded, so what a reader holds at once is bounded by what the
caller's dataset or table declares, never by the file (a key map of `streaming.convert.key_map`, a Delta
checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


class ParquetBoundsError(ValueError):
    """A Parquet file declares more rows or bytes than what it belongs to accounts for."""


def bounded_row_groups(
    source: Any, where: str, max_rows: int, max_bytes: int, columns: Sequence[str] | None = None
) -> Iterator[pa.Table]:
    """The row groups of the Parquet file ``source`` (a path, buffer or file object), in order.

    Before anything is decoded, the footer's total rows must be at most ``max_rows`` and each row group's
    decompressed bytes at most ``max_bytes``; else `ParquetBoundsError` naming ``where``. With ``columns``, only
    those are read (and counted).
    """
    parquet = pq.ParquetFile(source)
    footer = parquet.metadata
    if footer.num_rows > max_rows:
        raise ParquetBoundsError(
            f"{where} declares {footer.num_rows} rows, more than the {max_rows} it may hold; it was not read."
        )
    wanted = None if columns is None else set(columns)
    for number in range(footer.num_row_groups):
        group = footer.row_group(number)
        size = sum(
            group.column(index).total_uncompressed_size
            for index in range(group.num_columns)
            if wanted is None or group.column(index).path_in_schema.split(".")[0] in wanted
        )
        if size > max_bytes:
            raise ParquetBoundsError(
                f"{where}: row group {number} declares {size} bytes decompressed, more than the {max_bytes} its "
                f"{group.num_rows} rows may take; it was not read."
            )
        yield parquet.read_row_group(number, columns=list(columns) if columns is not None else None)


def declared_values(source: Any, column: str) -> int:
    """How many non-null values the Parquet file ``source`` declares for the leaf ``column`` (a dotted path, such
    as a Delta checkpoint's ``add.path``), from its footer alone: each row group's rows less its null count
    (all its rows where the writer kept no statistics, so the count never falls short)."""
    footer = pq.ParquetFile(source).metadata
    paths = [footer.schema.column(number).path for number in range(footer.num_columns)]
    if column not in paths:
        return 0
    index, total = paths.index(column), 0
    for number in range(footer.num_row_groups):
        group = footer.row_group(number)
        statistics = group.column(index).statistics
        nulls = statistics.null_count if statistics is not None and statistics.has_null_count else 0
        total += group.num_rows - nulls
    return total
