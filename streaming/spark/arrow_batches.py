"""Bound the bytes of each Arrow batch a conversion's task holds, well below serverless's 1 GB UDF memory cap.

Spark hands ``mapInArrow`` a partition as record batches of at most ``spark.sql.execution.arrow.maxRecordsPerBatch``
rows (10,000 by default): 10,000 rows of 100 kB are 1 GB, and a task holds its batch, the batch's encoded samples
and the shard being filled at once. So for the conversion's job (`bounded_batches`, set on the session for the job
and restored after):

* Spark 4 and later: ``spark.sql.execution.arrow.maxBytesPerBatch`` = `BATCH_BYTES`, so a batch is cut at 64 MiB (or
  after one row, when a single row is larger), whatever the row count (pyspark 4.3's default is the same 64 MiB: the
  setting keeps it where a cluster's configuration raises it);
* Spark 3.5 (which has no byte bound; Databricks' 3.5 runtimes get it set too, harmless where unknown): a row bound
  from the widest row of a sample, ``BATCH_BYTES // widest`` (at least 1, at most the session's own), measured by one
  small job over the first `SAMPLE_ROWS` rows sent one row per batch. A schema of fixed-width columns only needs no
  sample. Rows wider than the sample's widest make a larger batch: the task still encodes it in `BATCH_BYTES` slices.

Then every task encodes its batches in slices of at most `BATCH_BYTES` (`slices`), so the encoded copy stays bounded
too. A compute that refuses a setting (serverless answers ``CONFIG_NOT_AVAILABLE`` for most keys) keeps its own batch
sizes; the slices still bound what the task adds. Peak worker memory for wide rows is in docs/performance.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

#: The most bytes of Arrow data a task's batch holds (Spark's batch, and each slice the task encodes).
BATCH_BYTES = 64 * 1024 * 1024
MAX_BYTES_CONF = "spark.sql.execution.arrow.maxBytesPerBatch"
MAX_RECORDS_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
#: Rows the Spark 3.5 sample measures.
SAMPLE_ROWS = 100
_FIXED_WIDTHS = {
    "boolean": 1,
    "tinyint": 1,
    "smallint": 2,
    "int": 4,
    "date": 4,
    "float": 4,
    "bigint": 8,
    "double": 8,
    "timestamp": 8,
    "timestamp_ntz": 8,
}
_log = logging.getLogger(__name__)


@contextlib.contextmanager
def bounded_batches(frame: Any) -> Iterator[dict[str, str]]:
    """Set the Arrow batch bounds for jobs of `frame`'s session inside the block (yields what was set), then restore."""
    session = frame.sparkSession
    wanted = {MAX_BYTES_CONF: str(BATCH_BYTES)}
    if _major(session.version) < 4:
        rows = _rows_per_batch(frame, session)
        if rows is not None:
            wanted[MAX_RECORDS_CONF] = str(rows)
    saved: dict[str, str | None] = {}
    try:
        for key, value in wanted.items():
            previous = _get(session, key)
            try:
                session.conf.set(key, value)
            except Exception as err:  # noqa: BLE001 - a compute that refuses the key (serverless) keeps its own
                _log.info("%s could not be set here (%s): Spark's batches keep this compute's own bound", key, err)
                continue
            saved[key] = previous
        yield {key: wanted[key] for key in saved}
    finally:
        for key, previous in saved.items():
            with contextlib.suppress(Exception):
                if previous is None:
                    session.conf.unset(key)
                else:
                    session.conf.set(key, previous)


def slices(batches: Iterator[pa.RecordBatch], limit: int = BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """`batches`, each cut into zero-copy slices of about `limit` bytes at most (one row when a row is larger)."""
    for batch in batches:
        size = batch.nbytes
        if size <= limit or batch.num_rows <= 1:
            yield batch
            continue
        rows = max(1, batch.num_rows * limit // size)
        for start in range(0, batch.num_rows, rows):
            yield batch.slice(start, rows)


def widest_row(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A task of the Spark 3.5 sample: the most Arrow bytes one row of its batches held (batches of one row)."""
    widest = 0
    for batch in batches:
        if batch.num_rows:
            widest = max(widest, -(-batch.nbytes // batch.num_rows))
    yield pa.RecordBatch.from_pylist([{"bytes": widest}], schema=pa.schema([("bytes", pa.int64())]))


def _rows_per_batch(frame: Any, session: Any) -> int | None:
    """Spark 3.5's row bound: `BATCH_BYTES` over the widest row (fixed widths, else a sample), within the session's."""
    current = int(_get(session, MAX_RECORDS_CONF, default="10000") or 10000)
    widths = [_FIXED_WIDTHS.get(field.dataType.simpleString()) for field in frame.schema.fields]
    if all(width is not None for width in widths):
        widest = sum(width for width in widths if width is not None) + len(widths)  # a validity bit each, rounded up
    else:
        widest = _sampled_widest_row(frame, session)
    rows = max(1, BATCH_BYTES // max(1, widest))
    return min(rows, current) if current > 0 else rows


def _sampled_widest_row(frame: Any, session: Any) -> int:
    """The widest row among the first `SAMPLE_ROWS`, in Arrow bytes, measured one row per batch."""
    previous = _get(session, MAX_RECORDS_CONF)
    session.conf.set(MAX_RECORDS_CONF, "1")
    try:
        rows = frame.limit(SAMPLE_ROWS).mapInArrow(widest_row, "bytes LONG").collect()
    finally:
        if previous is None:
            session.conf.unset(MAX_RECORDS_CONF)
        else:
            session.conf.set(MAX_RECORDS_CONF, previous)
    return max((row["bytes"] for row in rows), default=0)


def _get(session: Any, key: str, default: str | None = None) -> str | None:
    """The value the session holds for `key`: set explicitly, else `default` (None when unreadable here)."""
    try:
        value = session.conf.get(key, default)
    except Exception:  # noqa: BLE001 - a compute that will not show the key
        return default
    return None if value is None else str(value)


def _major(version: str) -> int:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 0
