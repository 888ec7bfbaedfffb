"""The function a Spark job runs per task: one conversion task attempt (`streaming.convert.attempt`) per call.

``mapInArrow`` hands each task attempt its partition's record batches; the attempt writes them into its own
folder and yields one row for the driver describing what it wrote (`RESULT_SCHEMA`). The partition number and
the task attempt id come from Spark's ``TaskContext``; the attempt id is unique within the application, so
retries and speculative copies never share a folder. Environment variables given by the driver
(``executor_env``) are set only while the task runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping

import pyarrow as pa

from streaming.convert.attempt import TaskConfig, write_attempt
from streaming.spark.arrow_batches import slices

RESULT_SCHEMA = (
    "partition INT, attempt LONG, directory STRING, shards STRING, samples LONG, bytes LONG, peak_local_bytes LONG"
)
_RESULT_TYPES = pa.schema(
    [
        ("partition", pa.int32()),
        ("attempt", pa.int64()),
        ("directory", pa.string()),
        ("shards", pa.string()),
        ("samples", pa.int64()),
        ("bytes", pa.int64()),
        ("peak_local_bytes", pa.int64()),
    ]
)


#: What `check_worker_imports` answers: the worker's Python version.
CHECK_SCHEMA = "python STRING"


def check_worker_imports(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A task that needs what a conversion's tasks need (this module and the default compression's codec).

    Run by `streaming.spark.ship.ship_package`: a worker that cannot import this module, or zstandard, fails here.
    """
    import zstandard  # noqa: F401 - the default compression's codec, imported by the writer only when it compresses

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pylist([{"python": sys.version.split()[0]}], schema=pa.schema([("python", pa.string())]))


class PartitionWriter:
    """The function given to ``DataFrame.mapInArrow``: one call per task attempt."""

    def __init__(self, config: TaskConfig) -> None:
        self.config = config

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            raise RuntimeError("PartitionWriter must run inside a Spark task (TaskContext.get() returned None).")
        with environment(self.config.env):
            attempt = write_attempt(self.config, slices(batches), context.partitionId(), context.taskAttemptId())
        yield pa.RecordBatch.from_pylist([attempt.to_record()], schema=_RESULT_TYPES)


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore the previous ones."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
