"""`dataframe_to_mds`: convert a Spark DataFrame, table or Delta table into an MDS dataset.

The Spark engine of the conversion driver (`streaming.convert.driver`): it resolves the input and its column
types, then the driver checks the destination, plans NULLs (counted by `streaming.spark.nulls` where Delta
statistics do not say), and has this engine run one ``mapInArrow`` job (so it works on Spark Connect,
serverless and shared clusters) in which every task attempt writes its partition into its own folder
(`streaming.spark.task`), before it commits the attempts Spark reported as successful. A failed job leaves
the destination as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from streaming.convert.attempt import Attempt, TaskConfig
from streaming.convert.driver import ConversionResult, Settings, run_conversion
from streaming.convert.null_plan import check_policy
from streaming.convert.progress import Progress
from streaming.convert.source import Source
from streaming.format.compression import check_compression
from streaming.format.hashing import check_hashes
from streaming.format.mds.encodings import get_mds_encodings, is_mds_encoding
from streaming.format.writer import parse_size_limit
from streaming.spark.arrow_batches import bounded_batches
from streaming.spark.executor_access import check_executor_access
from streaming.spark.nulls import aggregate_null_counts, nullable_columns
from streaming.spark.schema import array_depth, is_variant, resolve_columns, select_expressions
from streaming.spark.table_input import resolve
from streaming.spark.task import RESULT_SCHEMA, PartitionWriter
from streaming.spark.worker_python import worker_import_problem
from streaming.spark.workspace_share import task_environment
from streaming.storage.dataset_root import DatasetRoot

__all__ = ["ConversionResult", "dataframe_to_mds"]


class SparkEngine:
    """Reads the DataFrame and runs the task attempts as one ``mapInArrow`` job."""

    task_label = "Spark partition"

    def __init__(self, frame: Any, source: Source, progress: bool, json_text: Collection[str] = ()) -> None:
        self.frame = frame
        self.source = source
        self.progress = progress
        self.json_text = list(json_text)

    def nullable_columns(self, columns: Collection[str]) -> tuple[list[str], list[str]]:
        return nullable_columns(self.frame, columns)

    def nested_columns(self, columns: Collection[str]) -> list[str]:
        return [name for name in columns if array_depth(self.frame.schema[name].dataType) >= 2]

    def json_text_columns(self, columns: Collection[str]) -> list[str]:
        return [name for name in columns if name in self.json_text]

    def count_nulls(
        self, values: list[str], elements: list[str], nested: list[str]
    ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        return aggregate_null_counts(self.frame, values, elements, nested)

    def run_attempts(self, config: TaskConfig, destination: DatasetRoot) -> list[Attempt]:
        bar = Progress(
            destination, config.run, _partition_count(self.frame), enabled=self.progress, flat=config.partition_folders
        )
        # Each machine the tasks run on takes its share of a Databricks workspace's request budget.
        config = dataclasses.replace(config, env=task_environment(self.frame, config.env))
        try:
            with bounded_batches(self.frame):  # each task's Arrow batches stay far below a UDF's memory cap
                rows = self.frame.mapInArrow(PartitionWriter(config), RESULT_SCHEMA).collect()
        except BaseException as err:
            bar.close()
            # A worker's failed import comes back as a Java stack trace around a Python one: say what it means.
            if (problem := worker_import_problem(err)) is not None:
                raise problem from None
            raise
        attempts = [Attempt.from_record(row) for row in rows]
        bar.close(len(attempts), sum(a.samples for a in attempts), sum(a.bytes for a in attempts))
        return attempts


def dataframe_to_mds(
    data: Any,
    out: str,
    *,
    columns: Mapping[str, str] | Sequence[str] | None = None,
    compression: str | None = "zstd",
    hashes: Sequence[str] = (),
    size_limit: int | str | None = "64mb",
    mode: str = "error",
    version: int | None = None,
    spark: Any = None,
    progress: bool = True,
    executor_env: Mapping[str, str] | None = None,
    merge_index: bool = True,
    partition_folders: bool = False,
    udf: Callable[..., Any] | None = None,
    udf_kwargs: dict[str, Any] | None = None,
    nulls: str = "mask",
    join_shards: Sequence[dict[str, Any]] = (),
) -> ConversionResult:
    """Convert ``data`` into an MDS dataset at ``out``, partition by partition.

    Args:
        data: a DataFrame (classic or Spark Connect), a table name, or a Delta table path.
        out: the dataset root: any URL the storage layer supports (``s3://``, ``gs://``, ``abfss://``,
            ``dbfs:/``, ``/Volumes/...``, ...) or a local path. Tasks write a local path directly, so on a
            cluster it must be a filesystem every executor sees (a mounted volume, ``/dbfs/...``).
        columns: ``{name: encoding}`` to choose encodings, a list of names to pick columns with their
            default encodings, or None for every column (see ``streaming.spark.schema`` for the rules).
        compression: shard compression, e.g. ``"zstd"``, ``"zstd:7"``, or None.
        hashes: hash algorithms recorded in the index for every shard file.
        size_limit: shard size cap (bytes or a string such as ``"64mb"``).
        mode: ``"error"`` refuses a non-empty ``out``; ``"overwrite"`` replaces the dataset there (its old
            files are deleted after the new index is published); ``"append"`` adds shards to it.
        version: for a table or Delta path input, the table version to convert (default: the latest).
        spark: the SparkSession used to read a table or Delta path (default: the active one).
        progress: show a progress bar on the driver.
        executor_env: environment variables each task sets while it writes, for storage settings the
            executors lack (e.g. credentials on standard access mode, where the cluster's are hidden from
            tasks). They travel inside the job, so prefer the cluster's own credentials for secrets. A
            destination the executors of this compute cannot reach is refused before any task starts
            (``streaming.spark.executor_access``).
        merge_index: publish the merged ``out/index.json``; if False, upstream's layout: one sub-directory
            per partition directly below ``out``, each with its own ``index.json``, and nothing at the root
            (see ``streaming.convert.commit``).
        partition_folders: with the merged index too, put each partition's folder directly below ``out``
            (each a dataset of its own, as upstream's converter leaves them) rather than in the run's folder.
        udf: instead of encoding the columns, call ``udf(batch_as_pandas, **udf_kwargs)`` and write the sample
            dicts it yields; ``columns`` must then be a dict of name to MDS encoding describing them.
        udf_kwargs: keyword arguments for ``udf``.
        nulls: ``"mask"`` (default): columns whose default encoding has no NULL and that hold NULLs are
            stored with a NULL-mask column and read back as None (counted from Delta statistics or one
            aggregate job first; see ``streaming.convert.null_plan``), with a warning naming them; ``"error"``:
            a NULL there stops the conversion. Columns given an encoding in a ``columns`` dict are never changed.
            When appending, columns the dataset masks stay masked, and NULLs in a column it stores without a
            mask are refused before anything is written. ``"nullable"``: every column the input marks nullable
            gets a mask whether or not it holds NULLs (nothing counted), and rows appended later may add masks
            the dataset lacks (what ``incremental_to_mds`` writes with, so no later NULL can stop it).
        join_shards: index entries of the shards of a dataset the written shards will join (as
            ``incremental_to_mds`` does with each run's folder): the columns must match theirs, as for
            ``mode="append"``, and NULL masks follow theirs.

    Returns:
        A :class:`ConversionResult`. A DataFrame with no rows gives a valid, empty dataset.
    """
    check_policy(nulls)  # arguments first: a bad one costs no table read
    settings = Settings(
        compression=check_compression(compression),
        hashes=tuple(check_hashes(list(hashes))),
        size_limit=parse_size_limit(size_limit),
        mode=mode,
        nulls=nulls,
        merge_index=merge_index,
        partition_folders=partition_folders,
        udf=udf,
        udf_kwargs=dict(udf_kwargs or {}),
        env=dict(executor_env or {}),
    )
    frame, source = resolve(data, spark, version)
    json_text: list[str] = []
    if udf is None:
        plan = resolve_columns(frame.schema, columns)
        # VARIANT columns reach the tasks as their JSON text (`select_expressions`).
        json_text = [field.name for field in frame.schema.fields if field.name in plan and is_variant(field.dataType)]
        frame = frame.selectExpr(*select_expressions(frame.schema, plan))
    else:
        plan = _checked_user_columns(columns)
    destination = DatasetRoot(out)
    check_executor_access(destination.url, executor_env, frame.sparkSession)
    explicit = set(columns) if isinstance(columns, Mapping) else set()
    return run_conversion(
        SparkEngine(frame, source, progress, json_text),
        destination,
        plan,
        settings,
        explicit=explicit,
        join_shards=join_shards,
    )


def _checked_user_columns(columns: Any) -> dict[str, str]:
    if not isinstance(columns, Mapping) or not columns:
        raise ValueError(
            "With a per-batch user function, `columns` must be a non-empty dict of column name -> "
            "MDS encoding describing the samples it yields."
        )
    for name, encoding in columns.items():
        if not isinstance(encoding, str) or not is_mds_encoding(encoding):
            raise ValueError(
                f"Column {name!r}: unknown MDS encoding {encoding!r}; valid encodings: "
                f"{', '.join(sorted(get_mds_encodings()))}."
            )
    return dict(columns)


def _partition_count(frame: Any) -> int | None:
    """The number of tasks the job will run, when Spark can say without running anything (not on Connect)."""
    try:
        return frame.rdd.getNumPartitions()
    except Exception:  # noqa: BLE001 - Spark Connect has no RDD API; the bar then counts without a total
        return None
