"""What one Spark task attempt does: write its partition as MDS shards into its own attempt folder.

The folder is ``<out>/<run>/part-<partition>-attempt-<task attempt id>/``; the attempt id is unique within
the Spark application, so retries and speculative copies never share a folder. On a local filesystem
(including mounted volumes) the writer writes there directly; anywhere else it stages each shard in a
temporary folder and ``StreamingSink`` uploads and deletes it as soon as it is complete. The attempt's
own ``index.json`` is written last and marks the attempt as complete. The task then yields one row
for the driver: which attempt it was and the shard entries it wrote. A failing attempt removes what it
wrote before re-raising; the driver deletes anything a killed attempt leaves behind. Environment
variables given by the driver (``executor_env``) are set only while the task runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from streaming.format.index import stored_file
from streaming.format.mds.writer import MDSWriter
from streaming.spark.arrow_encoder import BatchEncoder
from streaming.spark.sink import StreamingSink
from streaming.storage.local import local_path
from streaming.storage.registry import storage_for
from streaming.storage.scratch import make_scratch
from streaming.storage.url import join_url

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


@dataclass(frozen=True)
class TaskConfig:
    """Everything a task needs, shipped from the driver (plain data plus the optional user function)."""

    destination: str
    run: str
    columns: dict[str, str]
    compression: str | None
    hashes: tuple[str, ...]
    size_limit: int | None
    direct: bool
    udf: Callable[..., Any] | None = None
    udf_kwargs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    nulls: dict[str, str] = field(default_factory=dict)
    partition_folders: bool = False


def attempt_folder(run: str, partition: int, attempt: int) -> str:
    """The attempt's folder relative to the dataset root."""
    return f"{run}/part-{partition:05d}-attempt-{attempt}"


def partition_folder(run: str, partition: int, attempt: int) -> str:
    """The attempt's folder directly below the root, for the ``merge_index=False`` layout (``partition_folders``)."""
    return f"{run}-part-{partition:05d}-attempt-{attempt}"


class _AttemptWriter:
    """Opens the ``MDSWriter`` on the first sample, so an empty partition leaves no folder at all."""

    def __init__(self, config: TaskConfig, folder: str) -> None:
        self.config = config
        self.target = join_url(config.destination, folder)
        self.writer: MDSWriter | None = None
        self.sink: StreamingSink | None = None

    def get(self) -> MDSWriter:
        if self.writer is None:
            config = self.config
            if config.direct:
                out, options = local_path(self.target), {"exist_ok": True}
            else:
                out, options = make_scratch("mds-spark-"), {}  # removed by the sink, or by the next run
                self.sink = StreamingSink(out, self.target)
            self.writer = MDSWriter(
                out=out,
                columns=config.columns,
                compression=config.compression,
                hashes=list(config.hashes),
                size_limit=config.size_limit,
                sink=self.sink,
                **options,
            )
        return self.writer

    def discard(self) -> None:
        """After a failure: let the writer settle, then remove everything this attempt wrote.

        A failure inside the writer already aborted its sink; after any other (a bad row, a failing user
        function) the writer finishes first so that no shard thread is still uploading while this cleans up.
        """
        if self.writer is None:
            return
        with contextlib.suppress(Exception):
            self.writer.finish()
        if self.config.direct:
            shutil.rmtree(local_path(self.target), ignore_errors=True)
            return
        with contextlib.suppress(Exception):
            storage = storage_for(self.target)
            for url in storage.list(self.target):
                storage.delete(url)


def write_attempt(
    config: TaskConfig, batches: Iterator[pa.RecordBatch], partition: int, attempt: int
) -> dict[str, Any]:
    """Write one partition's batches as attempt ``attempt`` and return the attempt's result record."""
    folder = (partition_folder if config.partition_folders else attempt_folder)(config.run, partition, attempt)
    output = _AttemptWriter(config, folder)
    encoder = (
        None if config.udf else BatchEncoder(config.columns, where=f"Spark partition {partition}, ", nulls=config.nulls)
    )
    samples = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            writer = output.get()
            if config.udf is not None:
                for sample in config.udf(batch.to_pandas(), **config.udf_kwargs):
                    writer.write(sample)
            else:
                assert encoder is not None  # built above whenever there is no udf
                buffer, sizes = encoder.encode(batch, samples)
                writer.write_encoded_batch(buffer, sizes.tolist())
            samples = writer.samples_written
        if output.writer is not None:
            output.writer.finish()
    except BaseException:
        output.discard()
        raise
    shards = output.writer.shards if output.writer is not None else []
    return {
        "partition": partition,
        "attempt": attempt,
        "directory": folder if shards else "",
        "shards": json.dumps(shards),
        "samples": samples,
        "bytes": sum(stored_file(shard)["bytes"] for shard in shards),
        "peak_local_bytes": output.sink.peak_bytes if output.sink is not None else 0,
    }


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
            record = write_attempt(self.config, batches, context.partitionId(), context.taskAttemptId())
        yield pa.RecordBatch.from_pylist([record], schema=_RESULT_TYPES)


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
