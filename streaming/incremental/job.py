"""`incremental_to_mds`: bring an MDS dataset up to a newer version of a Delta table, safely re-runnable on a schedule.

The job's entry point: it checks the arguments and hands the run to one of the two ways of applying a change to a
dataset, appending (`streaming.incremental.append`) or mirroring (`streaming.incremental.mirror`), each of which
calls down into the reader its caller chose (`streaming.incremental.reader`), the change model
(`streaming.incremental.change`) and the run's commit (`streaming.incremental.commit`). This engine-neutral entry
reads a Delta path with delta-rs; `streaming.spark.incremental_to_mds` is the same job with Spark's reader too.

**What the dataset holds** (the one semantics of the default ``mode="append"``, whatever the table's history and
however the run reads it; ``mode="mirror"``, `streaming.incremental.mirror`, holds exactly the table's rows instead).
A run brings the dataset from the table version it holds, ``h``, to a version ``t``: it appends the rows of
``t`` that ``h`` did not have, ``rows(t) - rows(h)`` as multisets, and removes nothing. So the first run
holds version ``t``'s rows; after runs at versions ``v1 < v2 < ... < vn`` the dataset holds
``rows(v1) + (rows(v2) - rows(v1)) + ... + (rows(vn) - rows(vn-1))``. In table terms:

* appended rows are appended; an updated row's new value is appended and its old value stays; a deleted row
  stays; a MERGE is its inserts, updates and deletes; an overwrite, a ``REPLACE``/``CREATE OR REPLACE ... AS
  SELECT``, a ``TRUNCATE``, a ``RESTORE`` or a ``CLONE`` appends exactly the rows the new content has beyond the
  old (rewriting the same rows appends nothing);
* maintenance (``OPTIMIZE``, ``ZORDER BY``, auto compaction, predictive optimization, ``REORG``, ``VACUUM``,
  property and constraint changes: every commit whose actions are ``dataChange=false``) changes nothing, and a
  window of only such commits reads no rows at all;
* a column the table adds later is not in the dataset (its columns are fixed by its first run or by
  ``columns``), and rows are compared on the dataset's columns only; a dataset column the table drops stops the
  run, naming it;
* rows are compared by their identity (`streaming.convert.row_identity`): what the dataset stores of them, so
  at full precision (microseconds, NaN and -0.0, decimals, binary, nested values), NULL told apart from zero.

``unapplied_changes`` counts the rows of ``h`` that ``t`` no longer has (``rows(h) - rows(t)``): deleted rows
and old values of updated rows, which the append-only dataset keeps.

**How a run reads the change**, cheapest first; every way gives the same rows (the generated-history oracle
in ``tests/incremental`` checks that on real delta-rs tables):

1. nothing, when no commit of the window changed data (only ``dataChange=false`` commits);
2. the Change Data Feed (``change_data_feed=None`` or True), when the feed was enabled at every version of the
   window (read from the history, not today's properties) and no commit of the window replaces the table or
   changes its schema: the rows it adds (inserts, update post-images) minus the rows it takes away (deletes,
   pre-images);
3. the changed files: the rows of the data files the window added minus those of the files it removed
   (``dataChange=true`` actions of the Delta log, files added and removed inside the window cancelled), so
   the cost follows the change, not the table (a file with a deletion vector is read whole and the rows its
   vector marks dropped);
4. both versions whole, when the changed files cannot be read one by one (a shallow clone's files outside the
   table).

**When history is gone** (``VACUUM`` removed files the change needs, the log's retention removed its commit
files) the run stops with `IncrementalHistoryError`, naming the version and the way out: ``resync=True``
appends the rows of version ``t`` the dataset does not already hold, compared with the dataset's own stored
rows (it reads the whole dataset and table once; nothing is appended twice).

**The commit.** Each run that finds rows converts them into its own folder ``increments/v<version>-<run>/``
(`streaming.format.runs`), then makes one commit to the dataset's commit log (`streaming.format.commit_log`)
that adds those shards and records the table version (``source_versions``), even when no row was added, so
a later run starts from there. A run that dies before the commit changes nothing and the next redoes the
work (the dead run's folder is a leftover for ``vacuum``). Two runs from the same version cannot both commit:
the second to commit finds the first's version recorded and fails, appending nothing. Every run writes
with ``nulls="nullable"`` (`streaming.convert.null_plan`): every nullable column is masked from the first
run, so a NULL arriving later is stored as such, never refused. A dataset first written by
``dataframe_to_mds(table, out)`` continues from the table version that conversion recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from streaming.convert.key_map import MIRROR
from streaming.incremental.append import append_to_mds
from streaming.incremental.change import IncrementalHistoryError
from streaming.incremental.deltalake_reader import DeltaLakeChoice
from streaming.incremental.mirror import mirror_to_mds
from streaming.incremental.options import RunOptions
from streaming.incremental.reader import ReaderChoice
from streaming.incremental.result import IncrementResult
from streaming.storage.dataset_root import DatasetRoot

__all__ = ["IncrementResult", "IncrementalHistoryError", "RunOptions", "incremental_to_mds", "run_incremental"]


def incremental_to_mds(
    table: str,
    out: str,
    *,
    version: int | None = None,
    columns: Mapping[str, str] | Sequence[str] | None = None,
    compression: str | None = "zstd",
    hashes: Sequence[str] = (),
    size_limit: int | str | None = "64mb",
    change_data_feed: bool | None = None,
    progress: bool = True,
    nulls: str = "mask",
    resync: bool = False,
    mode: str = "append",
    key: Sequence[str] | None = None,
) -> IncrementResult:
    """Bring the dataset at ``out`` up to version ``version`` (the latest by default) of the Delta table at the path
    ``table``, read with delta-rs and written in this process, without Spark.

    The arguments are those of `streaming.spark.incremental_to_mds` (which also reads table names, with Spark),
    less ``spark`` and ``executor_env``.
    """
    options = RunOptions(
        version=version,
        columns=columns,
        compression=compression,
        hashes=hashes,
        size_limit=size_limit,
        change_data_feed=change_data_feed,
        progress=progress,
        nulls=nulls,
        resync=resync,
        mode=mode,
        key=key,
    )
    return run_incremental(lambda _: DeltaLakeChoice(), table, out, options)


def run_incremental(
    choose: Callable[[str], ReaderChoice], table: str, out: str, options: RunOptions
) -> IncrementResult:
    """One run, its options checked, in their mode; ``choose`` picks the reader of ``table`` (called once, after
    the options and the destination are checked), here, so that the run's walk never climbs back up to it."""
    if not isinstance(table, str) or not table:
        raise TypeError(f"`table` must be a Delta table name or path, got {table!r}.")
    options.check()
    destination = DatasetRoot(out)
    apply = mirror_to_mds if options.mode == MIRROR else append_to_mds
    return apply(choose(table), table, destination, options)
