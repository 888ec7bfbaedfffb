"""What one conversion task attempt does: write its share of the rows as MDS shards into its own folder.

The folder is ``<out>/<run>/part-<partition>-attempt-<attempt>/`` (`streaming.format.runs`); the engine gives
every attempt an id unique within the job (Spark's task attempt id), so retries and speculative copies never
share a folder. On a local filesystem (including mounted volumes) the writer writes there directly; anywhere
else it stages each shard in a temporary folder and `UploadingSink` uploads and deletes it as soon as it is
complete. The attempt's own ``index.json`` is written last and marks the attempt as complete. The attempt
then returns its `Attempt` record for the driver: which attempt it was and the shard entries it wrote. A
failing attempt removes what it wrote before re-raising; the driver deletes anything a killed attempt leaves.
Imports pyarrow, never pyspark: the Spark engine (`streaming.spark.task`) and the command line's pyarrow engine
(`streaming.convert.arrow_engine`) both run it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from streaming.convert.arrow_encoder import BatchEncoder
from streaming.convert.upload_sink import UploadingSink
from streaming.format.index import stored_file
from streaming.format.mds.writer import MDSWriter
from streaming.format.runs import attempt_folder, partition_folder
from streaming.storage.local import local_path
from streaming.storage.local_tree import LocalTree
from streaming.storage.registry import storage_for
from streaming.storage.scratch import make_scratch
from streaming.storage.url import join_url


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
    #: How errors name a task: ``"Spark partition"`` or the command line's ``"input task"``.
    task_label: str = "Spark partition"
    #: Column → ``(ML vector column, part)`` for the columns a ``sparse`` vector is kept as.
    parts: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Columns whose values arrive as JSON text, stored as they are (a VARIANT).
    json_text: tuple[str, ...] = ()

    def input_columns(self) -> list[str]:
        """The input's columns the tasks read (a NULL mask and a sparse vector's parts come from their column)."""
        masks = set(self.nulls.values())
        names = [self.parts[name][0] if name in self.parts else name for name in self.columns if name not in masks]
        return list(dict.fromkeys(names))


@dataclass(frozen=True)
class Attempt:
    """One successful task attempt as reported back to the driver.

    Attributes:
        partition: the partition (task) number.
        attempt: the attempt's id, unique within the job.
        directory: its folder relative to the dataset root (``""`` when it wrote nothing).
        shards: the shard entries of its own index (basenames relative to ``directory``).
        samples: samples it wrote.
        bytes: bytes of the shard files it wrote (as stored).
        peak_local_bytes: the most local disk it used for staging (0 when writing directly).
    """

    partition: int
    attempt: int
    directory: str
    shards: list[dict[str, Any]]
    samples: int
    bytes: int
    peak_local_bytes: int

    def to_record(self) -> dict[str, Any]:
        """The attempt as flat values (the shard entries as JSON text), for an engine's result rows."""
        return {
            "partition": self.partition,
            "attempt": self.attempt,
            "directory": self.directory,
            "shards": json.dumps(self.shards),
            "samples": self.samples,
            "bytes": self.bytes,
            "peak_local_bytes": self.peak_local_bytes,
        }

    @classmethod
    def from_record(cls, record: Any) -> Attempt:
        """The attempt of a record made by `to_record` (a dict, or a row that is indexed by name)."""
        return cls(
            partition=record["partition"],
            attempt=record["attempt"],
            directory=record["directory"],
            shards=json.loads(record["shards"]),
            samples=record["samples"],
            bytes=record["bytes"],
            peak_local_bytes=record["peak_local_bytes"],
        )


class _AttemptWriter:
    """Opens the ``MDSWriter`` on the first sample, so an empty partition leaves no folder at all."""

    def __init__(self, config: TaskConfig, folder: str) -> None:
        self.config = config
        self.folder = folder
        self.target = join_url(config.destination, folder)
        self.writer: MDSWriter | None = None
        self.sink: UploadingSink | None = None

    def get(self) -> MDSWriter:
        if self.writer is None:
            config = self.config
            if config.direct:
                out, options = local_path(self.target), {"exist_ok": True}
            else:
                out, options = make_scratch("mds-spark-"), {}  # removed by the sink, or by the next run
                self.sink = UploadingSink(out, self.target)
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
        if self.config.direct:  # through the destination's folder: a link swapped in below it is not followed
            with contextlib.suppress(OSError, ValueError):
                LocalTree(local_path(self.config.destination)).remove_tree(self.folder)
            return
        with contextlib.suppress(Exception):
            storage = storage_for(self.target)
            for url in storage.list(self.target):
                storage.delete(url)


def write_attempt(config: TaskConfig, batches: Iterator[pa.RecordBatch], partition: int, attempt: int) -> Attempt:
    """Write one partition's batches as attempt ``attempt`` and return what it wrote."""
    folder = (partition_folder if config.partition_folders else attempt_folder)(config.run, partition, attempt)
    output = _AttemptWriter(config, folder)
    where = f"{config.task_label} {partition}, "
    encoder = None
    if not config.udf:
        encoder = BatchEncoder(
            config.columns, where=where, nulls=config.nulls, parts=config.parts, json_text=config.json_text
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
    return Attempt(
        partition=partition,
        attempt=attempt,
        directory=folder if shards else "",
        shards=shards,
        samples=samples,
        bytes=sum(stored_file(shard)["bytes"] for shard in shards),
        peak_local_bytes=output.sink.peak_bytes if output.sink is not None else 0,
    )
