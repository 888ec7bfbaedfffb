"""`dataframe_to_mds`: convert a Spark DataFrame, table or Delta table into an MDS dataset.

The driver checks the types and the destination, then runs one ``mapInArrow`` job (so it works on Spark
Connect, serverless and shared clusters): every task attempt writes its partition into its own folder
(``task``), and the driver commits the attempts Spark reports as successful by publishing the merged
``index.json`` last (``commit``). A failed job leaves the destination as it was.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming._version import DISTRIBUTION_VERSION
from streaming.format.compression import check_compression
from streaming.format.hashing import check_hashes
from streaming.format.mds.encodings import get_mds_encodings, is_mds_encoding
from streaming.format.writer import parse_size_limit
from streaming.spark import commit
from streaming.spark.executor_access import check_executor_access
from streaming.spark.null_plan import NullPlan, check_policy, dataset_columns
from streaming.spark.nulls import plan_nulls
from streaming.spark.partition_folders import discard_partitions, publish_partitions
from streaming.spark.progress import Progress
from streaming.spark.schema import resolve_columns, select_expressions
from streaming.spark.source import resolve
from streaming.spark.task import RESULT_SCHEMA, PartitionWriter, TaskConfig
from streaming.spark.workspace_share import task_environment
from streaming.storage.destination import Destination

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConversionResult:
    """What a conversion wrote.

    Attributes:
        path: the dataset root.
        shards: shards this conversion added.
        samples: samples (rows) this conversion added.
        bytes: bytes of the shard files this conversion added (compressed size when compressed).
        table_version: the Delta table version converted, when the input was a Delta table.
        columns: column name → MDS encoding written.
        mode: the ``mode`` used.
        run: the run's folder under ``path``.
        peak_local_bytes: the most executor disk one task used for staging (0 when writing directly).
        nulls: value column → its NULL-mask column, for the columns whose NULLs were stored with a mask
            (``columns`` lists both; see ``streaming.spark.nulls``).
        nulls_json: ``ndarray`` columns written as ``json`` because their arrays hold NULL elements.
        nulls_counted_by: where the NULL counts came from (``"delta statistics"``, ``"aggregate"``), or None.
    """

    path: str
    shards: int
    samples: int
    bytes: int
    table_version: int | None
    columns: dict[str, str]
    mode: str
    run: str
    peak_local_bytes: int
    nulls: dict[str, str] = field(default_factory=dict)
    nulls_json: list[str] = field(default_factory=list)
    nulls_counted_by: str | None = None


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
            (see ``streaming.spark.partition_folders``).
        udf: instead of encoding the columns, call ``udf(batch_as_pandas, **udf_kwargs)`` and write the sample
            dicts it yields; ``columns`` must then be a dict of name to MDS encoding describing them.
        udf_kwargs: keyword arguments for ``udf``.
        nulls: ``"mask"`` (default): columns whose default encoding has no NULL and that hold NULLs are
            stored with a NULL-mask column and read back as None (counted from Delta statistics or one
            aggregate job first; see ``streaming.spark.null_plan``), with a warning naming them; ``"error"``:
            a NULL there stops the conversion. Columns given an encoding in a ``columns`` dict are never changed.
            When appending, columns the dataset masks stay masked, and NULLs in a column it stores without a
            mask are refused before anything is written.
        join_shards: index entries of the shards of a dataset the written shards will join (as
            ``incremental_to_mds`` does with each run's folder): the columns must match theirs, as for
            ``mode="append"``, and NULL masks follow theirs.

    Returns:
        A :class:`ConversionResult`. A DataFrame with no rows gives a valid, empty dataset.
    """
    compression = check_compression(compression)
    check_policy(nulls)
    checked_hashes = tuple(check_hashes(list(hashes)))
    limit = parse_size_limit(size_limit)
    frame, source = resolve(data, spark, version)
    if udf is None:
        plan = resolve_columns(frame.schema, columns)
        frame = frame.selectExpr(*select_expressions(frame.schema, plan))
    else:
        plan = _checked_user_columns(columns)
    destination = Destination(out)
    check_executor_access(destination.url, executor_env, frame.sparkSession)
    base = commit.check_destination(destination, mode)
    joined = [*(base.shards if mode == "append" else ()), *join_shards]
    if udf is None:  # counted after the destination checks, so a refused destination costs no job
        explicit = set(columns) if isinstance(columns, Mapping) else set()
        null_plan = plan_nulls(frame, source, plan, explicit, nulls, dataset_columns(joined))
        plan = null_plan.columns
    else:
        null_plan = NullPlan(plan)
    commit.check_append_columns(joined, plan, destination.url)
    run = new_run_id()
    config = TaskConfig(
        destination=destination.url,
        run=run,
        columns=plan,
        compression=compression,
        hashes=checked_hashes,
        size_limit=limit,
        direct=destination.is_local,
        udf=udf,
        udf_kwargs=dict(udf_kwargs or {}),
        env=task_environment(frame, executor_env),
        nulls=null_plan.masks,
        partition_folders=not merge_index,
    )
    bar = Progress(destination, run, _partition_count(frame), enabled=progress)
    try:
        rows = frame.mapInArrow(PartitionWriter(config), RESULT_SCHEMA).collect()
    except BaseException:
        bar.close()
        (commit.discard_run if merge_index else discard_partitions)(destination, run)
        raise
    attempts = commit.first_per_partition([_attempt(row) for row in rows])
    samples = sum(attempt.samples for attempt in attempts)
    size = sum(attempt.bytes for attempt in attempts)
    shard_count = sum(len(attempt.shards) for attempt in attempts)
    record = {
        "run": run,
        "mode": mode,
        "source": source.to_json(),
        "columns": plan,
        "nulls": null_plan.to_json(),
        "compression": compression,
        "hashes": list(checked_hashes),
        "size_limit": limit,
        "shards": shard_count,
        "samples": samples,
        "bytes": size,
        "writer": f"mds-streaming {DISTRIBUTION_VERSION}",
    }
    if merge_index:
        commit.publish(destination, run, attempts, mode, metadata=record, base=base)
    else:
        publish_partitions(destination, run, attempts, mode)
    bar.close(len(attempts), samples, size)
    logger.info(
        "dataframe_to_mds wrote %d samples in %d shards (%d bytes) to %s", samples, shard_count, size, destination.url
    )
    return ConversionResult(
        path=destination.url,
        shards=shard_count,
        samples=samples,
        bytes=size,
        table_version=source.version,
        columns=plan,
        mode=mode,
        run=run,
        peak_local_bytes=max((attempt.peak_local_bytes for attempt in attempts), default=0),
        nulls=null_plan.masks,
        nulls_json=null_plan.as_json,
        nulls_counted_by=null_plan.counted_by,
    )


def new_run_id() -> str:
    """A run folder name: UTC time (so runs sort by age) and a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


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


def _attempt(row: Any) -> commit.Attempt:
    return commit.Attempt(
        partition=row["partition"],
        attempt=row["attempt"],
        directory=row["directory"],
        shards=json.loads(row["shards"]),
        samples=row["samples"],
        bytes=row["bytes"],
        peak_local_bytes=row["peak_local_bytes"],
    )
