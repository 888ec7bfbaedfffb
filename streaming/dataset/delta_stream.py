"""`DeltaStream`: a stream whose source is a Delta table at a pinned version, read in place of an MDS index.

The stream pins one version of the table (the newest when it is first read, unless ``version`` names one) and
gives the dataset a shard table with one shard per data file of that version (`DeltaShardTable`): the file is the
unit the shard cache downloads into the stream's ``local`` folder, counts under ``cache_limit`` (its bytes, as the
log declares them) and evicts; its samples are the file's rows once its deletion vector is applied, read by
`streaming.dataset.delta_reader.DeltaFileReader` as the conversion of the same table would type them. Everything
above the shard table is the dataset's own: the epoch order, resumption, elastic world sizes and the mixing of
streams (``proportion``, ``repeat``, ``choose``) are those of MDS streams, unchanged.

Files are listed in path order, so the shard list (and with it the order) of a version is the same however its log
is laid out (a checkpoint written since, or log cleanup). A checkpoint names the version of every Delta stream
(`versions_entry`); a dataset resuming from it pins those versions again (`DeltaStream.pin`), and reads them as
long as their files exist: a file VACUUM removed fails with `HistoryUnavailableError` naming it and the version.

A `Stream` (or a single-stream dataset's ``remote``) naming a folder that holds ``_delta_log`` is read as that
table with no other argument (`streaming.dataset.delta_remote.holds_delta_table`, `DeltaStream.adopt`);
``streams_registry`` also names this class ``"delta"``, so
``StreamingDataset(remote=..., stream_name="delta", stream_config={"version": 12})`` pins a version. A remote given
as a table name is resolved to the table's folder first (`streaming.dataset.delta_table_name`). What the stream
shares with a folder of Parquet files (`streaming.dataset.parquet_stream`) is `PinnedRows`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa

from streaming.convert.arrow_columns import ArrowColumns
from streaming.convert.arrow_encoder import BatchEncoder
from streaming.convert.null_plan import WIDENING_POLICY, null_columns
from streaming.convert.source import Source
from streaming.convert.type_rules import json_text_columns, normalize_batch, resolve_columns
from streaming.dataset.delta_reader import DeltaFileReader
from streaming.dataset.delta_remote import DELTA_LOG
from streaming.dataset.shard_fetcher import ShardFetcher
from streaming.dataset.stream import Stream, check_cache_dir
from streaming.delta.deletion_vectors import deleted_positions
from streaming.delta.errors import HistoryUnavailableError
from streaming.delta.history import FileAction
from streaming.delta.scan import Scan
from streaming.delta.snapshot import Snapshot
from streaming.format.index import INDEX_VERSION, RAW_DATA, RAW_META, ZIP_DATA, ZIP_META
from streaming.format.reader import Reader
from streaming.format.table import FileColumn, ShardTable
from streaming.storage.parquet_bounds import ParquetBoundsError
from streaming.storage.untrusted_text import shown
from streaming.storage.url import check_relative_path, is_remote, join_url

#: The checkpoint key naming each stream's pinned Delta table version (None for an MDS stream).
VERSIONS_KEY = "delta_versions"
#: The shard ``format`` of a Delta data file in the shard table (never written to an index).
DELTA_FORMAT = "delta"


@dataclass(frozen=True)
class DeltaFile:
    """One data file of the pinned version, as the stream's shard.

    Attributes:
        action: its ``add`` action (path, partition values, deletion vector).
        name: its path relative to the table, decoded and checked: where it is fetched from and cached.
        size: its bytes, as the log declares them.
        rows: the rows it was written with (the log's ``numRecords``, else its footer's).
        samples: its rows once its deletion vector is applied.
    """

    action: FileAction
    name: str
    size: int
    rows: int
    samples: int


class _DetachedSnapshot(Snapshot):
    """A `Snapshot` that DataLoader workers receive pickled: without delta-rs's table (its metadata, schema and
    file list are already read) and without its filesystem, which each process opens anew."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "table": None, "_filesystem": None}


class PinnedRows:
    """The rows of a fixed list of Parquet data files, as a stream reads them: the files, and how rows become samples.

    The sample types are the conversion's: each column's default encoding (`resolve_columns`); NULL masks for the
    nullable columns but those ``null_free`` names (a conversion masks only where a NULL occurs: a sample reads the
    same either way); an ``ndarray`` column whose arrays hold NULL elements, or are not rectangular, is ``json`` in
    the row groups where that happens (a conversion decides it once for the whole table). Subclasses say where the
    rows come from (`scan`, `deleted_rows`): a Delta table's version (`PinnedTable`), or a folder of Parquet files
    (`streaming.dataset.parquet_stream.PinnedFolder`).
    """

    def __init__(
        self,
        uri: str,
        version: int | None,
        schema: pa.Schema,
        files: list[DeltaFile],
        source: Source,
        null_free: frozenset[str] = frozenset(),
    ) -> None:
        self.caller = "a Delta stream" if source.kind == "delta" else f"a {source.kind} stream"  # named in warnings
        self.uri = uri
        self.version = version
        self.token = f"{uri}@{version}"
        self.files = files
        self.source = source
        self.columns = resolve_columns(list(zip(schema.names, schema.types)), None)
        self._schema_questions = _Columns(schema)
        nullable, self.elements = self._schema_questions.nullable_columns(self.columns)
        # Columns known to hold no NULL get no mask, as in a conversion.
        self.nullable = [name for name in nullable if name not in null_free]
        self.nested = self._schema_questions.nested_columns(self.columns)
        self.json_text = json_text_columns([(name, schema.field(name).type) for name in self.columns])
        self._encoders: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], dict[str, str], BatchEncoder]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_encoders": {}}

    def scan(self) -> Any:
        """The reader of the data files: ``parquet_batches(action, parquet, rows, row_groups)`` and ``schema``."""
        raise NotImplementedError

    def deleted_rows(self, file: DeltaFile, rows: int) -> np.ndarray | None:
        """The sorted positions of the file's rows that are not samples, None when all are."""
        return None

    def normalized(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Rows of a row group as the conversion's encoder takes them (`normalize_batch`)."""
        return normalize_batch(batch, dict.fromkeys(self.columns, ""))

    def encoding(self, table: pa.Table, where: str) -> tuple[dict[str, str], dict[str, str], BatchEncoder]:
        """The columns (masks included), NULL masks and encoder of a row group's rows (see the class docstring)."""

        def count(
            values: list[str], elements: list[str], nested: list[str]
        ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
            # Arrays without a NULL element at any depth (the common case) need no count row by row.
            clean = [name for name in elements if name not in nested and _no_null_elements(table.column(name))]
            left = [name for name in elements if name not in clean]
            counts, rows, ragged = self._schema_questions.count_batches(table.to_batches(), values, left, nested)
            return counts, {**rows, **dict.fromkeys(clean, 0)}, ragged

        plan = null_columns(
            self.columns,
            explicit=(),
            policy=WIDENING_POLICY,
            nullable=self.nullable,
            null_elements=self.elements,
            source=self.source,
            count=count,
            caller=self.caller,
            nested=self.nested,
        )
        key = tuple(sorted(plan.columns.items()))
        found = self._encoders.get(key)
        if found is None:
            encoder = BatchEncoder(plan.columns, where=where, nulls=plan.masks, json_text=self.json_text)
            found = self._encoders[key] = (plan.columns, plan.masks, encoder)
        return found

    def shard_table(self) -> DeltaShardTable:
        """The dataset's view of the files: one shard per file (see `DeltaShardTable`)."""
        count = len(self.files)
        config = {"version": INDEX_VERSION, "format": DELTA_FORMAT, "compression": None, "size_limit": None}
        sizes = np.array([file.size for file in self.files], np.int64)
        names = np.array([file.name for file in self.files]) if count else np.zeros(0, "<U1")
        raw = FileColumn(names, sizes, np.array([b"{}"] * count) if count else np.zeros(0, "S2"))
        return DeltaShardTable(
            samples=np.array([file.samples for file in self.files], np.int64),
            raw_bytes=sizes,
            zip_bytes=np.zeros(count, np.int64),
            config_ids=np.zeros(count, np.int32),
            configs=[config],
            files={RAW_DATA: raw, ZIP_DATA: None, RAW_META: None, ZIP_META: None},
            pinned=self,
        )


class PinnedTable(PinnedRows):
    """A Delta table pinned to one version, as its stream reads it (see `PinnedRows`): the files' deletion vectors
    applied, columns the log's statistics show without a NULL in every file given no NULL mask."""

    def __init__(self, snapshot: Snapshot, files: list[DeltaFile], null_free: frozenset[str] = frozenset()) -> None:
        detached = _DetachedSnapshot.__new__(_DetachedSnapshot)
        detached.__dict__.update(snapshot.__dict__)
        self.snapshot: Snapshot = detached
        source = Source(kind="delta", name=None, version=snapshot.version, reader="stream")
        super().__init__(snapshot.uri, snapshot.version, Scan(snapshot).schema, files, source, null_free)
        self.version: int = snapshot.version
        self._scan: Scan | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_scan": None}

    def scan(self) -> Scan:
        """The table's reader of data files at this version (made once per process)."""
        if self._scan is None:
            self._scan = Scan(self.snapshot)
        return self._scan

    def deleted_rows(self, file: DeltaFile, rows: int) -> np.ndarray | None:
        """The sorted positions the file's deletion vector marks, None without one."""
        vector = file.action.vector
        if vector is None:
            return None
        where = f"{self.uri}/{file.name}"
        return deleted_positions(vector, rows, self.snapshot.filesystem, where)


def _no_null_elements(column: pa.ChunkedArray) -> bool:
    """Whether no list of ``column``, at any depth, holds a NULL element (a NULL list itself is the row's NULL)."""
    import pyarrow.compute as pc

    values: Any = column
    while pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        values = pc.list_flatten(values)
        if values.null_count:
            return False
    return True


class _Columns(ArrowColumns):
    """The conversion's schema questions (nullable, nested, JSON text columns) over the table's schema."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema


@dataclass
class DeltaShardTable(ShardTable):
    """A `ShardTable` whose shards are the data files of a pinned Delta version (or of a Parquet folder), read by
    `DeltaFileReader`."""

    pinned: PinnedRows | None = None

    def reader(self, dirname: str, split: str | None, shard_id: int) -> Reader:
        assert self.pinned is not None  # always given by `PinnedRows.shard_table`
        return DeltaFileReader(dirname, split, self.pinned, shard_id)


def pin_table(uri: str, version: int | None) -> PinnedTable:
    """The table at ``uri`` pinned to ``version`` (the newest when None), its files listed in path order.

    Each file's bytes and rows come from its ``add`` action in the log (``size``, the statistics' ``numRecords``);
    a file whose action lacks one has it read from storage (its size, its footer's row count). Files whose every row
    is deleted are left out.
    """
    snapshot = Snapshot.open(uri, version)
    snapshot.check_readable()
    files = []
    for action in snapshot.files():
        name = check_relative_path(unquote(action.path), f"Delta table {shown(uri)}", "data file path")
        size, rows = action.size, _declared_rows(action)
        if size is None:
            size = int(snapshot.filesystem.get_file_info(snapshot.data_path(action.path)).size)
        if rows is None:
            rows = _footer_rows(snapshot, action)
        deleted = 0
        if action.vector is not None:
            cardinality = action.vector.get("cardinality")
            if not isinstance(cardinality, int) or isinstance(cardinality, bool) or not 0 <= cardinality <= rows:
                raise ParquetBoundsError(
                    f"The deletion vector of {shown(name)} in version {snapshot.version} of {shown(uri)} marks "
                    f"{cardinality!r} rows of a file of {rows}; the table's log is damaged."
                )
            deleted = cardinality
        if rows - deleted > 0:
            files.append(DeltaFile(action, name, size, rows, rows - deleted))
    files.sort(key=lambda file: file.name)
    # The columns no live file's statistics count a NULL in (by physical name; a file without a count leaves its
    # column out), which the samples then need no NULL mask for.
    null_free = frozenset(name for name, count in snapshot.null_counts(snapshot.schema.names).items() if count == 0)
    return PinnedTable(snapshot, files, null_free)


def _declared_rows(action: FileAction) -> int | None:
    """The rows the action's statistics declare (``numRecords``), None without a count there."""
    try:
        stats = json.loads(action.stats) if action.stats else None
    except (ValueError, RecursionError):
        return None
    rows = stats.get("numRecords") if isinstance(stats, dict) else None
    return rows if isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0 else None


def _footer_rows(snapshot: Snapshot, action: FileAction) -> int:
    import pyarrow.parquet as pq

    with snapshot.filesystem.open_input_file(snapshot.data_path(action.path)) as handle:
        return int(pq.ParquetFile(handle).metadata.num_rows)


class DeltaStream(Stream):
    """A `Stream` over a Delta table (see the module docstring); its arguments are `Stream`'s, and ``version``.

    Args:
        version: the table version to read (the newest when the dataset is built, when None).
    """

    def __init__(
        self,
        *,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        proportion: float | None = None,
        repeat: float | None = None,
        choose: int | None = None,
        download_retry: int | None = None,
        download_timeout: float | None = None,
        validate_hash: str | None = None,
        keep_zip: bool | None = None,
        version: int | None = None,
    ) -> None:
        super().__init__(
            remote=remote,
            local=local,
            split=split,
            proportion=proportion,
            repeat=repeat,
            choose=choose,
            download_retry=download_retry,
            download_timeout=download_timeout,
            validate_hash=validate_hash,
            keep_zip=keep_zip,
        )
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
            raise ValueError(f"version must be a Delta table version (an int >= 0), got {version!r}.")
        self.version = version
        self._pinned: PinnedTable | None = None
        self._fetcher: ShardFetcher | None = None

    @classmethod
    def adopt(cls, stream: Stream) -> None:
        """Make the plain `Stream` ``stream`` a Delta stream of its remote's newest version, in place.

        The object stays the caller's (its class changes, its settings stay): upstream stores each stream's
        resolved weights on the objects the caller passed."""
        stream.__class__ = cls
        delta: Any = stream
        delta.version = None
        delta._pinned = None
        delta._fetcher = None

    def table_uri(self) -> str:
        """Where the table is: the remote (and split), a local one as an absolute path."""
        if self.remote is None:
            raise ValueError("A Delta stream needs a remote: the table's folder.")
        if is_remote(self.remote):
            return join_url(self.remote, self.split) if self.split else self.remote.rstrip("/")
        from streaming.storage.local import local_path

        return os.path.abspath(os.path.join(local_path(self.remote), self.split))

    @property
    def pinned(self) -> PinnedTable | None:
        """The pinned table, once the stream was read (None before)."""
        return self._pinned

    def pin(self, version: int | None) -> PinnedTable:
        """Pin the table to ``version`` (the newest when None), re-reading its log when the version changes."""
        if self._pinned is None or version is None or self._pinned.version != version:
            self._pinned = pin_table(self.table_uri(), version)
        self.version = self._pinned.version
        return self._pinned

    def load_table(self) -> ShardTable:
        """The pinned version's files as the dataset's shard table (pinning the table when first asked)."""
        if self.has_remote and self._local is not None:
            check_cache_dir(self._local)
        if not self.has_remote:
            raise ValueError(
                f"The local cache folder of the Delta stream over {shown(str(self.remote))} is the table itself; "
                f"pass another local= (the folder its files are copied to)."
            )
        os.makedirs(os.path.join(self.local, self.split), mode=0o700, exist_ok=True)
        pinned = self._pinned if self._pinned is not None else self.pin(self.version)
        return pinned.shard_table()

    def remote_index_location(self) -> str | None:
        """The table's log: a cache folder holds the files of one table (or one MDS dataset) only."""
        return None if self.remote is None else join_url(self.table_uri(), DELTA_LOG)

    def get_index_size(self) -> int:
        """No index file is kept: the pinned file list lives in memory."""
        return 0

    def prepare_shard(self, shard: Reader) -> int:
        """Fetch a data file into the local folder (`ShardFetcher`); a file gone from the table (removed by VACUUM)
        is `HistoryUnavailableError` naming it and the pinned version."""
        if self._fetcher is None:
            self._fetcher = ShardFetcher(self)
        try:
            return self._fetcher.fetch(shard)
        except FileNotFoundError as err:
            version = self._pinned.version if self._pinned is not None else self.version
            name = shard.file_pairs[0][0].basename
            raise HistoryUnavailableError(
                f"Version {version} of the Delta table {shown(self.table_uri())} cannot be read any more: its data "
                f"file {shown(name)} is gone from the table (VACUUM removes the files of old versions). Resume from "
                f"the start of an epoch on the table's current version (a checkpoint with 'sample_in_epoch' 0 and "
                f"without {VERSIONS_KEY!r}), or restore the file. ({type(err).__name__})",
                version,
            ) from None


def versions_entry(streams: Sequence[Stream]) -> dict[str, Any]:
    """The checkpoint key naming each Delta stream's pinned version (nothing when no stream is a Delta table)."""
    versions = [stream.version if isinstance(stream, DeltaStream) else None for stream in streams]
    return {} if all(version is None for version in versions) else {VERSIONS_KEY: versions}


def repin(streams: Sequence[Stream], checkpoint: dict[str, Any]) -> bool:
    """Pin each Delta stream to the version ``checkpoint`` names for it; return whether any pin changed.

    Raises:
        ValueError: the checkpoint's versions do not match the dataset's streams.
    """
    recorded = checkpoint.get(VERSIONS_KEY)
    if recorded is None:
        return False
    if not isinstance(recorded, list) or len(recorded) != len(streams):
        raise ValueError(
            f"load_state_dict: the checkpoint's {VERSIONS_KEY!r} must list one version (or None) per stream "
            f"({len(streams)}), got {recorded!r}."
        )
    changed = False
    for number, (stream, version) in enumerate(zip(streams, recorded)):
        if version is None and getattr(stream, "version", None) is None:  # an MDS stream, or a Parquet folder's
            continue
        if not isinstance(stream, DeltaStream) or isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(
                f"load_state_dict: the checkpoint names Delta version {version!r} for stream {number}, which is "
                f"{'not a Delta table' if not isinstance(stream, DeltaStream) else 'a Delta table'} here."
            )
        if stream.version != version:
            stream.pin(version)
            changed = True
    return changed
