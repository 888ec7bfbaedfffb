"""The conversion driver: the one sequence every conversion runs, whichever engine reads the rows.

1. The destination is checked for the ``mode`` before any work (`commit.check_destination`), so a refused
   destination costs nothing and bad credentials fail here rather than in every task.
2. The NULL plan: which columns get NULL masks or become ``json`` (`null_plan.null_columns`), from the
   engine's own NULL counts; columns joining an existing dataset keep its encodings.
3. The task configuration, then the engine runs every task attempt (`Engine.run_attempts`): each writes into
   its own folder (`streaming.convert.attempt`). If that fails, the run's files are removed and the
   dataset is left as it was.
4. The conversion record (source, columns, NULL plan, settings, counts, writer), published with the commit.
5. The commit (`commit.publish`: one commit of the dataset's commit log, then ``index.json``) or, with
   ``merge_index=False``, upstream's one folder per partition and nothing else (`commit.publish_folders`).

Engines: Spark (`streaming.spark.convert`, one ``mapInArrow`` job) and pyarrow
(`streaming.convert.arrow_engine`, a process pool; the command line's ``convert``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from streaming._version import DISTRIBUTION_VERSION
from streaming.convert import commit
from streaming.convert.attempt import Attempt, TaskConfig
from streaming.convert.null_plan import WIDENING_POLICY, NullPlan, check_policy, dataset_columns, null_columns
from streaming.convert.source import Source
from streaming.convert.type_rules import expand_sparse
from streaming.format.runs import new_run_id
from streaming.storage.dataset_root import DatasetRoot

logger = logging.getLogger(__name__)


class Engine(Protocol):
    """What reads a conversion's rows and runs its task attempts."""

    #: Where the rows come from (recorded, and used for Delta statistics in the NULL plan).
    source: Source
    #: How task errors name a task, e.g. ``"Spark partition"``.
    task_label: str

    def nullable_columns(self, columns: Collection[str]) -> tuple[list[str], list[str]]:
        """Of ``columns``: those the input marks nullable, and the array columns whose elements (at any depth)
        are nullable."""

    def nested_columns(self, columns: Collection[str]) -> list[str]:
        """Of ``columns``: those holding arrays of arrays of numbers (`type_rules.array_element` depth 2 or more)."""

    def json_text_columns(self, columns: Collection[str]) -> list[str]:
        """Of ``columns``: those whose values reach a task as JSON text (`type_rules.is_json_text`)."""

    def count_nulls(
        self, values: list[str], elements: list[str], nested: list[str]
    ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """One pass over the rows: NULLs of each of ``values``, rows with a NULL element (at any depth) of each of
        ``elements``, rows that are not rectangular of each of ``nested``."""

    def run_attempts(self, config: TaskConfig, destination: DatasetRoot) -> list[Attempt]:
        """Run every task attempt with ``config``; the attempts the engine reports successful, one per task."""


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
        peak_local_bytes: the most local disk one task used for staging (0 when writing directly).
        nulls: value column → its NULL-mask column, for the columns whose NULLs were stored with a mask
            (``columns`` lists both; see `streaming.convert.null_plan`).
        nulls_json: ``ndarray`` columns written as ``json`` because their arrays hold NULL elements.
        ragged_json: ``ndarray`` columns written as ``json`` because some row's arrays of arrays are not
            rectangular.
        nulls_counted_by: where the NULL counts came from (``"delta statistics"``, ``"aggregate"``), or None.
        tasks: task attempts that wrote shards.
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
    tasks: int = 0
    ragged_json: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Settings:
    """How to write: the checked arguments of a conversion (see ``dataframe_to_mds`` for each)."""

    compression: str | None
    hashes: tuple[str, ...]
    size_limit: int | None
    mode: str
    nulls: str = "mask"
    merge_index: bool = True
    #: Attempt folders directly below the root (upstream's layout: one dataset per partition) rather than in the
    #: run's folder; always so without a merged index.
    partition_folders: bool = False
    udf: Callable[..., Any] | None = None
    udf_kwargs: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    #: Who is converting, as named in warnings and recorded as the dataset's writer.
    caller: str = "dataframe_to_mds"


def run_conversion(
    engine: Engine,
    destination: DatasetRoot,
    columns: dict[str, str],
    settings: Settings,
    *,
    explicit: Collection[str] = (),
    join_shards: Sequence[dict[str, Any]] = (),
) -> ConversionResult:
    """Convert the engine's rows into the dataset at ``destination``, in the steps of the module docstring.

    Args:
        engine: what reads the rows and runs the tasks.
        destination: the dataset root.
        columns: ``{name: encoding}`` to write, resolved by the type rules (or the user function's columns).
        settings: how to write.
        explicit: the columns the user chose an encoding for (their NULL handling is never changed).
        join_shards: index entries of a dataset the written shards will join (as ``incremental_to_mds`` does
            with each run's folder): the columns must match theirs, and NULL masks follow theirs.
    """
    check_policy(settings.nulls)
    base = commit.check_destination(destination, settings.mode)
    joined = [*(base.shards if settings.mode == "append" else ()), *join_shards]
    null_plan = _null_plan(engine, columns, explicit, settings, joined)
    written, parts = expand_sparse(null_plan.columns)
    widening = settings.nulls == WIDENING_POLICY
    commit.check_append_columns(joined, written, destination.url, widening=widening)
    run = new_run_id()
    flat = settings.partition_folders or not settings.merge_index
    json_text = engine.json_text_columns(columns) if settings.udf is None else []
    config = TaskConfig(
        destination=destination.url,
        run=run,
        columns=written,
        compression=settings.compression,
        hashes=settings.hashes,
        size_limit=settings.size_limit,
        direct=destination.is_local,
        udf=settings.udf,
        udf_kwargs=dict(settings.udf_kwargs),
        env=dict(settings.env),
        nulls=null_plan.masks,
        partition_folders=flat,
        task_label=engine.task_label,
        parts=parts,
        json_text=tuple(name for name in json_text if written.get(name) == "json"),
    )
    try:
        attempts = commit.first_per_partition(engine.run_attempts(config, destination))
    except BaseException:
        commit.discard_run(destination, run, flat=flat)
        raise
    samples = sum(attempt.samples for attempt in attempts)
    size = sum(attempt.bytes for attempt in attempts)
    shards = sum(len(attempt.shards) for attempt in attempts)
    record = {
        "run": run,
        "mode": settings.mode,
        "source": engine.source.to_json(),
        "columns": written,
        "nulls": null_plan.to_json(),
        "compression": settings.compression,
        "hashes": list(settings.hashes),
        "size_limit": settings.size_limit,
        "shards": shards,
        "samples": samples,
        "bytes": size,
        "writer": f"mds-streaming {DISTRIBUTION_VERSION} ({settings.caller})",
    }
    root_url = destination.url
    if settings.merge_index:
        commit.publish(
            destination, run, attempts, settings.mode, metadata=record, base=base, flat=flat, widening=widening
        )
    else:
        commit.publish_folders(destination, run, attempts, settings.mode)
    logger.info("%s wrote %d samples in %d shards (%d bytes) to %s", settings.caller, samples, shards, size, root_url)
    return ConversionResult(
        path=destination.url,
        shards=shards,
        samples=samples,
        bytes=size,
        table_version=engine.source.version,
        columns=written,
        mode=settings.mode,
        run=run,
        peak_local_bytes=max((attempt.peak_local_bytes for attempt in attempts), default=0),
        nulls=null_plan.masks,
        nulls_json=null_plan.as_json,
        nulls_counted_by=null_plan.counted_by,
        tasks=sum(1 for attempt in attempts if attempt.shards),
        ragged_json=null_plan.ragged,
    )


def _null_plan(
    engine: Engine,
    columns: dict[str, str],
    explicit: Collection[str],
    settings: Settings,
    joined: list[dict[str, Any]],
) -> NullPlan:
    """The columns to write once NULLs are accounted for (a user function's columns are taken as given)."""
    if settings.udf is not None:
        return NullPlan(dict(columns))
    nullable, null_elements = engine.nullable_columns(columns)
    return null_columns(
        columns,
        explicit=explicit,
        policy=settings.nulls,
        nullable=nullable,
        null_elements=null_elements,
        source=engine.source,
        count=engine.count_nulls,
        dataset=dataset_columns(joined),
        caller=settings.caller,
        nested=engine.nested_columns(columns),
    )
