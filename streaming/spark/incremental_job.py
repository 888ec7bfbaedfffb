"""`incremental_to_mds` with Spark: the scheduled job (`streaming.incremental`) reading a table with Spark's Delta
reader, or with delta-rs where Spark cannot (`streaming.spark.table_changes.choose_reader`).

The job itself, what a dataset holds after each run and how a run reads the change, is engine-neutral and
documented in `streaming.incremental.job`; this module adds only the choice of Spark's reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streaming.incremental.job import run_incremental
from streaming.incremental.options import RunOptions
from streaming.incremental.result import IncrementResult
from streaming.spark.table_changes import choose_reader


def incremental_to_mds(
    table: str,
    out: str,
    *,
    version: int | None = None,
    spark: Any = None,
    columns: Mapping[str, str] | Sequence[str] | None = None,
    compression: str | None = "zstd",
    hashes: Sequence[str] = (),
    size_limit: int | str | None = "64mb",
    change_data_feed: bool | None = None,
    progress: bool = True,
    executor_env: Mapping[str, str] | None = None,
    nulls: str = "mask",
    resync: bool = False,
    mode: str = "append",
    key: Sequence[str] | None = None,
) -> IncrementResult:
    """Bring the dataset at ``out`` up to version ``version`` (the latest by default) of the Delta table ``table``.

    Appends the rows the new version has that the version the dataset holds did not (`streaming.incremental.job`
    states it for every kind of history); with ``mode="mirror"`` the dataset holds exactly the table's rows
    instead (`streaming.incremental.mirror`).

    Args:
        table: a Delta table name (``catalog.schema.table``) or a Delta table path.
        out: the dataset root (as for ``dataframe_to_mds``); created by the first run.
        version: the table version to bring the dataset up to (default: the latest).
        spark: the SparkSession to read the table with (default: the active one). A Delta path is read with
            delta-rs where Spark has no Delta support or no session runs; its rows are then written on the
            driver, without a Spark job.
        columns, compression, hashes, size_limit, progress, executor_env: as for ``dataframe_to_mds``.
            ``columns`` fixes the dataset's columns on its first run; later runs keep them when it is None.
        nulls: ``"mask"`` (default): every nullable column gets a NULL mask from the first run, so later NULLs
            are stored as they come (``nulls="nullable"`` of ``dataframe_to_mds``); ``"error"``: a NULL stops
            the run, naming the column.
        change_data_feed: True to require the table's Change Data Feed, False never to read it, None to read it
            whenever it was enabled at every version of the window.
        resync: instead of reading the change since the version the dataset holds (when the table's history no
            longer has it), append the rows of the target version the dataset does not already hold, compared
            with the dataset's own rows.
        mode: ``"append"`` (default): the append-only semantics above; ``"mirror"``: after each run the dataset
            holds exactly the table's rows, deleted rows removed and updated rows replaced, rewriting only the
            shards that held them (`streaming.incremental.mirror`). A dataset keeps the mode of its first run.
        key: with ``mode="mirror"``, the columns that identify a row (unique in every table version); None for a
            Delta path with row tracking keys the mirror by its stable row ids, stored in the column ``_row_id``.

    Returns:
        An :class:`IncrementResult`.
    """
    options = RunOptions(
        version=version,
        columns=columns,
        compression=compression,
        hashes=hashes,
        size_limit=size_limit,
        change_data_feed=change_data_feed,
        progress=progress,
        executor_env=executor_env,
        nulls=nulls,
        resync=resync,
        mode=mode,
        key=key,
    )
    return run_incremental(lambda name: choose_reader(spark, name), table, out, options)
