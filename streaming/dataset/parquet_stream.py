"""`ParquetStream`: a stream over a folder of Parquet files (no Delta log, no MDS index), read where they lie.

The folder is listed once, when the dataset is built (`pin_folder`): its data files are the ``.parquet`` files
below it, a part starting with ``_`` or ``.`` skipped (a writer's ``_SUCCESS``, ``_temporary/``, checksums), in
path order, one shard per file, as a Delta stream has (`streaming.dataset.delta_stream`); their rows and schema
come from their footers. Folders named ``key=value`` (Hive's layout, as Spark's ``df.write.partitionBy(...)``
writes it) give each file's rows the column ``key``: ``int64`` where every value of the folder's files is an
integer, else text; ``__HIVE_DEFAULT_PARTITION__`` is NULL; a file's own column of that name wins. Files whose
schemas differ are read as their union (a column a file lacks is NULL there); two types of one column are refused.

Everything else is the Delta stream's: the shard cache downloads each file whole into ``local`` (counting its
bytes under ``cache_limit``), `streaming.dataset.delta_reader.DeltaFileReader` checks its footer and row groups
before decoding and types its rows as the conversion does (`PinnedRows`). A folder has no versions: the stream
reads the files the listing found, and a checkpoint records no version for it.

A local folder is listed and its footers opened without following a link (`LocalTree`, `table_filesystem`); a
remote one through the storage layer (listing) and delta-rs's object store (footers), as a Delta table's files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from streaming.convert.source import Source
from streaming.dataset.delta_remote import parquet_files
from streaming.dataset.delta_stream import DeltaFile, DeltaStream, PinnedRows
from streaming.dataset.shard_fetcher import ShardFetcher
from streaming.delta.history import FileAction
from streaming.delta.snapshot import object_store
from streaming.delta.timestamps import PARQUET_OPTIONS
from streaming.format.reader import Reader
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.table_files import table_filesystem
from streaming.storage.untrusted_text import shown

#: How Hive (and Spark) name the folder of a NULL partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_INTEGER = re.compile(r"[+-]?\d{1,19}")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def partition_values(name: str) -> dict[str, str | None]:
    """The ``key=value`` folders of a file's root-relative path, decoded as Hive escapes them (``%3D``...)."""
    values: dict[str, str | None] = {}
    for part in name.split("/")[:-1]:
        key, equals, value = part.partition("=")
        if equals and key:
            text = unquote(value)
            values[unquote(key)] = None if text == HIVE_NULL else text
    return values


def _partition_type(values: list[str | None]) -> pa.DataType:
    """``int64`` where every value is an integer in its range, else text."""
    texts = [value for value in values if value is not None]
    if texts and all(_INTEGER.fullmatch(text) and _INT64[0] <= int(text) <= _INT64[1] for text in texts):
        return pa.int64()
    return pa.string()


class FolderScan:
    """Rows of a folder's files as batches of the folder's ``schema``: the file's columns cast to it, partition
    values as constant columns, a column the file lacks as NULL (``Scan.parquet_batches``'s contract)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def parquet_batches(
        self, action: FileAction, parquet: pq.ParquetFile, batch_rows: int, row_groups: list[int] | None = None
    ) -> Iterator[pa.RecordBatch]:
        stored = set(parquet.schema_arrow.names)
        read = [field.name for field in self.schema if field.name in stored]
        constants = action.partition_values or {}
        footer = parquet.metadata
        for group in range(footer.num_row_groups) if row_groups is None else row_groups:
            if not read:  # only partition columns: the row group's row count is all the file gives
                yield self._batch(None, footer.row_group(group).num_rows, constants)
                continue
            for batch in parquet.iter_batches(batch_rows, row_groups=[group], columns=read):
                yield self._batch(batch, batch.num_rows, constants)

    def _batch(self, batch: pa.RecordBatch | None, count: int, constants: Any) -> pa.RecordBatch:
        arrays = []
        for field in self.schema:
            if batch is not None and field.name in batch.schema.names:
                column = batch.column(field.name)
                arrays.append(column if column.type == field.type else column.cast(field.type))
            elif constants.get(field.name) is not None:
                arrays.append(pa.repeat(pa.scalar(constants[field.name]).cast(field.type), count))
            else:
                arrays.append(pa.nulls(count, field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


class PinnedFolder(PinnedRows):
    """The files of a Parquet folder as one listing found them (see the module docstring and `PinnedRows`)."""

    def __init__(self, uri: str, schema: pa.Schema, files: list[DeltaFile]) -> None:
        super().__init__(uri, None, schema, files, Source(kind="parquet", name=None, reader="stream"))
        self._scan = FolderScan(schema)

    def scan(self) -> FolderScan:
        return self._scan


def pin_folder(uri: str) -> PinnedFolder:
    """The Parquet folder at ``uri`` (a local path or any URL the package reads) as its files now are.

    Raises:
        FileNotFoundError: no data file below ``uri``.
        ValueError: two files give one column two types, or a file is not Parquet.
    """
    names = parquet_files(DatasetRoot(uri).list_relative())
    if not names:
        raise FileNotFoundError(f"No Parquet files (*.parquet) below {shown(uri)}.")
    filesystem = table_filesystem(uri) or object_store(uri)
    footers = []
    for name in names:
        try:
            with filesystem.open_input_file(name) as handle:
                size = int(handle.size())
                footers.append((name, size, pq.ParquetFile(handle, **PARQUET_OPTIONS).metadata))
        except (pa.ArrowInvalid, OSError) as err:
            if isinstance(err, FileNotFoundError):
                raise
            raise ValueError(f"{shown(name)} below {shown(uri)} is not a readable Parquet file: {err}") from None
    try:
        schema = pa.unify_schemas([footer.schema.to_arrow_schema().remove_metadata() for _, _, footer in footers])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise ValueError(f"The Parquet files below {shown(uri)} give a column two types: {err}") from None
    partitions = [partition_values(name) for name in names]
    for key in dict.fromkeys(key for values in partitions for key in values):
        if key not in schema.names:
            schema = schema.append(pa.field(key, _partition_type([values.get(key) for values in partitions])))
    files = []
    for (name, size, footer), values in zip(footers, partitions):
        if footer.num_rows > 0:
            action = FileAction(name, True, partition_values=values, size=size)
            files.append(DeltaFile(action, name, size, footer.num_rows, footer.num_rows))
    return PinnedFolder(uri, schema, files)


class ParquetStream(DeltaStream):
    """A `Stream` over a folder of Parquet files (see the module docstring); its arguments are `Stream`'s."""

    def pin(self, version: int | None) -> PinnedFolder:  # type: ignore[override]
        """List the folder (once: a folder has no versions to pin again)."""
        if version is not None:
            raise ValueError(f"The Parquet folder {shown(self.table_uri())} has no versions; got version {version}.")
        if self._pinned is None:
            self._pinned = pin_folder(self.table_uri())  # type: ignore[assignment]
        assert isinstance(self._pinned, PinnedFolder)
        return self._pinned

    def remote_index_location(self) -> str | None:
        """The folder itself: a cache folder holds the files of one folder (or one MDS dataset) only."""
        return None if self.remote is None else self.table_uri()

    def prepare_shard(self, shard: Reader) -> int:
        """Fetch a data file into the local folder (a file gone since the listing is the storage's error)."""
        if self._fetcher is None:
            self._fetcher = ShardFetcher(self)
        return self._fetcher.fetch(shard)
