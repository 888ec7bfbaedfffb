"""`convert_files`: Parquet, Delta, JSON Lines, CSV or a saved Hugging Face dataset → MDS, without Spark.

The pyarrow engine of the conversion driver (`streaming.convert.driver`), behind the command line's
``convert``: pyarrow reads the input (`streaming.convert.arrow_inputs`) split into tasks, and a process pool
runs one task attempt per task, each streaming its record batches through the same encoder, type rules and
commit protocol as ``dataframe_to_mds``, so both write the same dataset. NULLs are counted from Parquet
footers where every row group has them, else in one read of the input.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import pyarrow as pa

from streaming.convert.arrow_columns import ArrowColumns
from streaming.convert.arrow_inputs import ArrowInput, Task, batches, detect, read_schema
from streaming.convert.attempt import Attempt, TaskConfig, write_attempt
from streaming.convert.driver import ConversionResult, Settings, run_conversion
from streaming.convert.null_plan import check_policy
from streaming.convert.source import Source
from streaming.convert.type_rules import (
    normalize_batch,
    resolve_columns,
)
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.out_argument import normalize_root
from streaming.storage.url import is_remote


class ArrowEngine(ArrowColumns):
    """Reads the input with pyarrow and runs one task attempt per input task in a process pool."""

    task_label = "input task"

    def __init__(
        self,
        source: ArrowInput,
        schema: pa.Schema,
        target: pa.Schema,
        workers: int,
        on_task_done: Callable[[Task], None] | None = None,
    ) -> None:
        self.input = source
        self.schema = schema
        self.target = target
        self.workers = workers
        self.on_task_done = on_task_done
        reader = "deltalake" if source.kind == "delta" else "pyarrow"
        self.source = Source(source.kind, source.root, source.version, reader)

    def count_nulls(
        self, values: list[str], elements: list[str], nested: list[str]
    ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """Like `ArrowColumns.count_batches` over the whole input, with NULLs from Parquet footers first."""
        counts = _parquet_footer_null_counts(self.input, values)
        unread = [name for name in values if name not in counts]
        if unread or elements or nested:
            everything = (batch for task in self.input.tasks for batch in batches(task))
            counted, rows_with_null_elements, ragged_rows = self.count_batches(everything, unread, elements, nested)
            return {**counts, **counted}, rows_with_null_elements, ragged_rows
        return counts, dict.fromkeys(elements, 0), dict.fromkeys(nested, 0)

    def run_attempts(self, config: TaskConfig, destination: DatasetRoot) -> list[Attempt]:
        tasks = self.input.tasks
        attempts = []
        if self.workers == 1 or len(tasks) == 1:
            for number, task in enumerate(tasks):
                attempts.append(_convert_task(config, task, number, self.target))
                self._done(task)
            return attempts
        # fork where there is one: workers start at once with the modules already imported (spawn costs
        # seconds per worker); nothing of ours runs threads in the parent before the pool starts.
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(min(self.workers, len(tasks)), mp_context=context) as pool:
            futures = {
                pool.submit(_convert_task, config, task, number, self.target): task for number, task in enumerate(tasks)
            }
            for future in as_completed(futures):
                attempts.append(future.result())
                self._done(futures[future])
        return attempts

    def _done(self, task: Task) -> None:
        if self.on_task_done is not None:
            self.on_task_done(task)


def convert_files(
    src: str,
    out: str,
    *,
    kind: str | None = None,
    split: str | None = None,
    workers: int = 1,
    **options: Any,
) -> ConversionResult:
    """Convert the file or folder ``src`` (any URL) into the MDS dataset ``out`` with pyarrow.

    ``kind`` is the input format (detected when None), ``split`` the split of a Hugging Face DatasetDict,
    ``workers`` the processes; ``options`` are `convert_input`'s.
    """
    return convert_input(detect(src, kind, workers, split), out, workers=workers, **options)


def convert_input(
    source: ArrowInput,
    out: str,
    *,
    columns: dict[str, str | None] | None = None,
    compression: str | None = "zstd",
    hashes: tuple[str, ...] = (),
    size_limit: int | None = 1 << 26,
    mode: str = "error",
    workers: int = 1,
    nulls: str = "mask",
    on_task_done: Callable[[Task], None] | None = None,
) -> ConversionResult:
    """Convert a resolved input (`arrow_inputs.detect`) into the MDS dataset ``out``.

    Arguments are those of ``dataframe_to_mds`` (already checked), plus ``workers`` (processes) and
    ``on_task_done``, called in this process as each input task is written.
    """
    check_policy(nulls)
    schema = read_schema(source.tasks[0])
    values = resolve_columns(list(zip(schema.names, schema.types)), columns)
    target = normalize_batch(pa.RecordBatch.from_pylist([], schema=schema), values).schema
    settings = Settings(compression, tuple(hashes), size_limit, mode, nulls=nulls, caller="convert")
    explicit = [name for name, encoding in (columns or {}).items() if encoding is not None]
    engine = ArrowEngine(source, schema, target, workers, on_task_done)
    return run_conversion(engine, DatasetRoot(normalize_root(out)), values, settings, explicit=explicit)


def _convert_task(config: TaskConfig, task: Task, partition: int, target: pa.Schema) -> Attempt:
    """Run in a worker process: write one task's batches as attempt 0 of partition ``partition``."""
    values = dict.fromkeys(config.input_columns(), "")

    def cast(stream: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in stream:
            normalized = normalize_batch(batch, values)
            if normalized.schema != target:
                try:
                    normalized = normalized.cast(target)
                except Exception as err:
                    raise ValueError(
                        f"{task.url}: its columns have types {normalized.schema} but the first input file's are "
                        f"{target} and cannot hold them ({err}); convert the files separately or fix their types."
                    ) from err
            yield normalized

    return write_attempt(config, cast(batches(task)), partition, 0)


def _parquet_footer_null_counts(source: ArrowInput, names: list[str]) -> dict[str, int]:
    """NULL counts of top-level primitive columns from local Parquet footers, where every row group has them."""
    import pyarrow.parquet as pq

    if source.kind != "parquet" or not names or any(is_remote(task.url) for task in source.tasks):
        return {}
    counts = dict.fromkeys(names, 0)
    for task in source.tasks:
        metadata = pq.ParquetFile(normalize_root(task.url)).metadata
        leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
        groups = task.row_groups if task.row_groups is not None else range(metadata.num_row_groups)
        for name in list(counts):
            statistics = [
                metadata.row_group(group).column(leaves[name]).statistics if name in leaves else None
                for group in groups
            ]
            known = [item.null_count for item in statistics if item is not None and item.has_null_count]
            if len(known) == len(statistics):
                counts[name] += sum(known)
            else:
                del counts[name]
    return counts
