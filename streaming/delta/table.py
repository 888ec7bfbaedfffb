"""A Delta table read with delta-rs (``deltalake``): its versions, its history window, and rows as Arrow.

What the incremental job reads from a table given by path when Spark has no Delta support (see
`streaming.incremental.deltalake_reader`): a snapshot, the commit files of a window of versions
(`streaming.delta.history`), the Change Data Feed of the window, and the rows of chosen data files
only, each read where it lies with its partition values, so a diff reads the files a change touched and not
the table. A remote table is read through delta-rs's own object store (its credentials, its paths); a local
one only through `streaming.storage.table_files.table_filesystem`, which opens each file of the table (log,
checkpoints, data files, deletion vectors) by descriptor without following a link: delta-rs then only reads the
log to pin a version, and the rows are read here file by file (`delta_batches`), the Change Data Feed's too
(`DeltaLakeTable.feed`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from streaming._extras import require
from streaming.delta.deletion_vectors import deleted_positions
from streaming.delta.history import (
    CDF_PROPERTY,
    COLUMN_MAPPING_PROPERTY,
    FileAction,
    HistoryUnavailableError,
    TableWindow,
    normal_schema,
    read_log_window,
)
from streaming.delta.opening import open_delta_table
from streaming.delta.row_ids import (
    ROW_ID,
    RowIdsUnavailable,
    RowTracking,
    live_files,
    row_tracking,
    stable_row_ids,
)
from streaming.storage.table_files import check_table_files, inside_path, table_filesystem
from streaming.storage.url import is_remote

#: Where a column-mapped table's schema names a field's name in the data files.
PHYSICAL_NAME = "delta.columnMapping.physicalName"
#: The reader features of the Delta protocol that this module's own reader of a local table implements (column
#: mapping's physical names, deletion vectors, plain timestamps; the other two change nothing a reader does). Any
#: other one (``typeWidening``, ``variantType``…) is refused, as the protocol asks of a reader that lacks it.
LOCAL_READER_FEATURES = frozenset(
    {"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}
)
#: Change Data Feed row kinds that add a row to the table, and those that take one away.
FEED_PLUS = ("insert", "update_postimage")
FEED_MINUS = ("delete", "update_preimage")


class FilesNotReadable(Exception):
    """The changed files cannot be read one by one (column mapping, files outside the table)."""


class DeltaLakeTable:
    """The Delta table at ``uri``, pinned to ``version`` (the latest when None)."""

    def __init__(self, uri: str, version: int | None = None) -> None:
        self.uri = uri
        self.table = self._at(version)
        self.version: int = self.table.version()
        self._filesystem: Any = None

    @property
    def schema(self) -> pa.Schema:
        """The table's Arrow schema at the pinned version."""
        return pa.schema(self.table.schema().to_arrow())

    def snapshot(self, version: int | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Every row of ``version`` (the pinned one by default) with ``columns`` (all by default), as the pinned
        version's types; a column an older version lacked is NULL there, as Delta reads it."""
        table = self.table if version is None or version == self.version else self._at(version)
        names = list(columns) if columns else self.schema.names
        have = set(pa.schema(table.schema().to_arrow()).names)
        rows = delta_rows(table, [name for name in names if name in have])
        arrays = [
            rows.column(name) if name in have else pa.nulls(rows.num_rows, self.schema.field(name).type)
            for name in names
        ]
        return self._conform(pa.Table.from_arrays(arrays, names=names), names)

    def window(self, start: int) -> TableWindow:
        """The history of versions ``start + 1 ..`` the pinned version, from the table's commit files."""
        feed, schema = None, None
        try:
            held = self._at(start)
            feed = str(held.metadata().configuration.get(CDF_PROPERTY, "")).lower() == "true"
            schema = _schema_string(held)
        except Exception:  # noqa: BLE001 - the version may be gone from the log: then its setting is unknown
            pass
        return read_log_window(
            self._read_text, start, self.version, feed_at_start=feed, schema_at_start=schema, table=self.uri
        )

    def feed(self, start: int, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        """The Change Data Feed of versions ``start + 1 ..`` the pinned version: the rows it adds (inserts and
        post-images) and those it takes away (deletes and pre-images), with ``columns``. A local table's is read
        here from its files (`_local_feed`): delta-rs's reader opens them by path."""
        if not is_remote(self.uri):
            return self._local_feed(start, columns)
        feed = self.table.load_cdf(
            starting_version=start + 1, ending_version=self.version, columns=[*columns, "_change_type"]
        )
        extra = {"_change_type": pa.string()}
        schema = self.schema
        wanted = pa.schema([schema.field(n) if n in schema.names else (n, extra[n]) for n in feed.schema.names])
        changes = _plain(_read_stream(feed, wanted))
        kinds = changes.column("_change_type").cast(pa.string())
        plus = changes.filter(pc.is_in(kinds, pa.array(FEED_PLUS)))
        minus = changes.filter(pc.is_in(kinds, pa.array(FEED_MINUS)))
        return self._conform(plus, columns), self._conform(minus, columns)

    def _local_feed(self, start: int, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
        """The Change Data Feed of versions ``start + 1 ..`` the pinned version as PROTOCOL.md defines it: a
        commit's change data files where it wrote them, else the rows of the files it added (inserts) and removed
        (deletes) with ``dataChange``, deletion vectors applied; every file read through `_fs`."""
        window = read_log_window(
            self._read_text, start, self.version, feed_at_start=None, schema_at_start=None, table=self.uri
        )
        plus, minus = [], []
        for commit in window.commits:
            if commit.changes:
                rows = self._change_rows(commit.changes, columns)
                kinds = rows.column("_change_type")
                plus.append(self._conform(rows.filter(pc.is_in(kinds, pa.array(FEED_PLUS))), columns))
                minus.append(self._conform(rows.filter(pc.is_in(kinds, pa.array(FEED_MINUS))), columns))
                continue
            added = [(action, commit.version) for action in commit.adds if action.data_change]
            removed = [(action, commit.version) for action in commit.removes if action.data_change]
            plus.extend([self.files(added, columns)] if added else [])
            minus.extend([self.files(removed, columns)] if removed else [])
        empty = self._empty(columns, None)
        return (pa.concat_tables(plus) if plus else empty), (pa.concat_tables(minus) if minus else empty)

    def _change_rows(self, changes: Sequence[FileAction], columns: Sequence[str]) -> pa.Table:
        """The rows of change data files with ``columns`` and their ``_change_type``."""
        if maps_column_names(self.table):
            raise FilesNotReadable("the table maps column names to physical names (column mapping)")
        schema = self.schema
        partitions = list(self.table.metadata().partition_columns)
        fileformat = ds.ParquetFileFormat()
        fragments = [
            fileformat.make_fragment(
                inside_path(self.uri, action.path),
                filesystem=self._fs(),
                partition_expression=_partition_expression(action, partitions, schema),
            )
            for action in changes
        ]
        with_kind = schema.append(pa.field("_change_type", pa.string()))
        dataset = ds.FileSystemDataset(fragments, schema=with_kind, format=fileformat, filesystem=self._fs())
        return _plain(dataset.to_table(columns=[*columns, "_change_type"]))

    def row_tracking(self) -> RowTracking | None:
        """The table's row tracking at the pinned version (`streaming.delta.row_ids`), None without."""
        return row_tracking(self.table.metadata().configuration or {}, self.table.protocol().writer_features)

    def files(
        self, actions: Sequence[tuple[FileAction, int]], columns: Sequence[str], tracking: RowTracking | None = None
    ) -> pa.Table:
        """The rows of the data files ``actions`` name (each with the version that added or removed it), with
        ``columns``; with ``tracking``, also each row's stable row id (column `ROW_ID`), file by file.

        Raises `FilesNotReadable` when a file cannot be read on its own here, and `HistoryUnavailableError`
        naming that version when a file is gone (removed by VACUUM).
        """
        if maps_column_names(self.table):
            raise FilesNotReadable("the table maps column names to physical names (column mapping)")
        schema = self.schema
        partitions = list(self.table.metadata().partition_columns)
        fileformat = ds.ParquetFileFormat()
        fragments = []
        for action, _ in actions:
            if "://" in action.path or action.path.startswith("/"):
                raise FilesNotReadable(f"{action.path} lies outside the table's folder (a shallow clone)")
            expression = _partition_expression(action, partitions, schema)
            fragments.append(
                fileformat.make_fragment(unquote(action.path), filesystem=self._fs(), partition_expression=expression)
            )
        try:
            if tracking is not None or any(action.vector is not None for action, _ in actions):
                parts = [
                    self._file_rows(fragment, action, columns, tracking)
                    for fragment, (action, _) in zip(fragments, actions)
                ]
                return pa.concat_tables(parts) if parts else self._empty(columns, tracking)
            dataset = ds.FileSystemDataset(fragments, schema=schema, format=fileformat, filesystem=self._fs())
            rows = dataset.to_table(columns=list(columns))
        except FileNotFoundError as err:
            version = _version_of_missing(err, actions)
            raise HistoryUnavailableError(
                f"a data file that version {version} of {self.uri} added or removed is gone (removed by VACUUM): "
                f"{_first_line(err)}",
                version,
            ) from None
        return self._conform(_plain(rows), columns)

    def tracked_snapshot(self, version: int | None, columns: Sequence[str], tracking: RowTracking) -> pa.Table:
        """Every row of ``version`` (the pinned one by default) with ``columns`` and its stable row id (`ROW_ID`),
        read file by file from the log's own list of files (delta-rs gives no ``baseRowId``)."""
        number = self.version if version is None else version
        actions = live_files(self._fs(), self._read_text, number, self.uri)
        try:
            return self.files([(action, number) for action in actions], columns, tracking)
        except FilesNotReadable as err:
            raise RowIdsUnavailable(f"the row ids of version {number} of {self.uri} cannot be read: {err}") from None

    # -- helpers ---------------------------------------------------------------------------------------
    def _file_rows(
        self, fragment: Any, action: FileAction, columns: Sequence[str], tracking: RowTracking | None
    ) -> pa.Table:
        """One file's rows with ``columns`` (as the table's types), in file order, without those its deletion
        vector marks; with ``tracking``, also their stable row ids."""
        schema = self.schema
        rows = ds.FileSystemDataset([fragment], schema=schema, format=fragment.format, filesystem=self._fs())
        values = self._conform(_plain(rows.to_table(columns=list(columns))), columns)
        if tracking is not None:
            hidden = tracking.materialized
            stored = None
            if hidden is not None and hidden in fragment.physical_schema.names:
                stored = fragment.to_table(columns=[hidden]).column(hidden)
            try:
                ids = stable_row_ids(values.num_rows, action, stored)
            except RowIdsUnavailable:
                raise RowIdsUnavailable(f"{self.uri}: the log gives no baseRowId for {action.path}") from None
            values = values.append_column(pa.field(ROW_ID, pa.int64(), nullable=False), ids)
        if action.vector is None:
            return values
        # Positions (and so default ids) count every row the file was written with; the marked rows go after.
        kept = np.ones(values.num_rows, dtype=bool)
        kept[deleted_positions(action.vector, values.num_rows, self._fs(), f"{self.uri}/{action.path}")] = False
        return values.filter(pa.array(kept))

    def _empty(self, columns: Sequence[str], tracking: RowTracking | None) -> pa.Table:
        empty = self.schema.empty_table().select(list(columns))
        if tracking is None:
            return empty
        return empty.append_column(pa.field(ROW_ID, pa.int64(), nullable=False), pa.array([], pa.int64()))

    def _at(self, version: int | None) -> Any:
        """The table at ``version``, opened once its checkpoint is bounded (`open_delta_table`), its data files
        checked (`check_table_files`: no link is followed)."""
        # Through `require`, the first deltalake import of a run: without it, the error names the delta extra.
        exceptions = require("deltalake.exceptions", "delta", "Reading a Delta table without Spark")
        TableNotFoundError = exceptions.TableNotFoundError

        try:
            table = open_delta_table(self.uri, version)
        except TableNotFoundError as err:
            if version is None:
                raise
            # delta-rs's words for a version its log no longer reaches: log cleanup removed its commit files.
            raise HistoryUnavailableError(
                f"version {version} of {self.uri} is no longer in the table's log ({_first_line(err)}; Delta removes "
                f"commit files older than the table's delta.logRetentionDuration when it writes a checkpoint)",
                version,
            ) from None
        check_table_files(self.uri, table.file_uris())
        return table

    def _fs(self) -> Any:
        """A pyarrow filesystem rooted at the table: for a local table one that follows no link
        (`table_filesystem`), else one over delta-rs's own object store."""
        if self._filesystem is None:
            local = table_filesystem(self.uri)
            if local is not None:
                refuse_unread_features(self.table)
            self._filesystem = local or _object_store(self.table, self.uri)
        return self._filesystem

    def _read_text(self, relative: str) -> str | None:
        return read_text(self._fs(), relative)

    def _conform(self, rows: pa.Table, columns: Sequence[str] | None) -> pa.Table:
        """``rows`` with ``columns`` (all by default) as the pinned version's types, whatever read them."""
        schema = self.schema
        names = list(columns) if columns else schema.names
        target = pa.schema([schema.field(name) for name in names])
        return rows.select(names).cast(target)


def delta_rows(table: Any, names: list[str]) -> pa.Table:
    """Every row of a delta-rs table with ``names``, in plain Arrow types (see `delta_batches`)."""
    from deltalake.exceptions import DeltaProtocolError

    if not is_remote(table.table_uri):
        schema = _plain_schema(table)
        return pa.Table.from_batches(list(_local_batches(table, 1 << 20)), schema=schema).select(names)
    if maps_column_names(table):
        return _queried(table).read_all().select(names)
    try:
        return _plain(table.to_pyarrow_table(columns=names))
    except DeltaProtocolError:
        return _queried(table).read_all().select(names)


def delta_batches(table: Any, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of a delta-rs table as record batches in plain Arrow types.

    A local table's files are read here, each opened by descriptor without following a link
    (`_local_batches`). A remote one is read by delta-rs's Arrow reader, or where that refuses the table's
    reader features (deletion vectors, which Databricks recommends) or would misread it (column mapping,
    `maps_column_names`), its query engine, which applies them."""
    from deltalake.exceptions import DeltaProtocolError

    if not is_remote(table.table_uri):
        yield from _local_batches(table, batch_rows)
        return
    try:
        dataset = None if maps_column_names(table) else table.to_pyarrow_dataset()
    except DeltaProtocolError:
        dataset = None
    if dataset is None:
        yield from _queried(table)
        return
    yield from dataset.to_batches(batch_size=batch_rows, use_threads=False)


def read_text(filesystem: Any, relative: str) -> str | None:
    """The text of the file ``relative`` under a pyarrow ``filesystem`` rooted at a table (None when missing)."""
    try:
        with filesystem.open_input_stream(relative) as stream:
            return stream.read().decode("utf-8")
    except FileNotFoundError:
        return None


def _local_batches(table: Any, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of a local delta-rs table at its version, read file by file through `table_filesystem`.

    The files and their deletion vectors are listed from the log by this package (`live_files`, itself read
    through that filesystem); each data file is opened once, by descriptor, and its rows that its deletion
    vector marks are dropped. Under column mapping the files' physical names are read and given their
    logical names."""
    uri = table.table_uri
    refuse_unread_features(table)
    files = table_filesystem(uri)
    logical = _plain_schema(table)
    physical = _physical_schema(logical, table.schema().to_json()) if maps_column_names(table) else logical
    partitions = list(table.metadata().partition_columns)
    fileformat = ds.ParquetFileFormat()
    try:
        actions = live_files(files, lambda relative: read_text(files, relative), table.version(), uri)
    except RowIdsUnavailable as err:  # a V2 checkpoint: its sidecar files are not replayed here
        raise FilesNotReadable(f"the files of {uri} cannot be listed here without delta-rs: {err}") from None
    for action in actions:
        fragment = fileformat.make_fragment(
            inside_path(uri, action.path),
            filesystem=files,
            partition_expression=_partition_expression(action, partitions, physical),
        )
        deleted = None
        if action.vector is not None:
            rows = fragment.metadata.num_rows
            deleted = deleted_positions(action.vector, rows, files, f"{uri}/{action.path}")
        read = ds.FileSystemDataset([fragment], schema=physical, format=fileformat, filesystem=files)
        start = 0
        for batch in read.to_batches(batch_size=batch_rows, use_threads=False):
            if deleted is not None:
                kept = np.ones(batch.num_rows, dtype=bool)
                inside = deleted[(deleted >= start) & (deleted < start + batch.num_rows)]
                kept[inside - start] = False
                start += batch.num_rows
                batch = batch.filter(pa.array(kept))
            yield batch if physical is logical else _logical_batch(batch, logical)


def _object_store(table: Any, uri: str) -> Any:
    """A pyarrow filesystem over delta-rs's own object store for a remote table."""
    from deltalake.exceptions import DeltaProtocolError

    try:
        return table.to_pyarrow_dataset().filesystem
    except DeltaProtocolError:
        # delta-rs's Arrow reader refuses tables with deletion vectors, but its storage handler reads their
        # files as any other (what a mirror keyed by row ids needs).
        from deltalake.fs import DeltaStorageHandler
        from pyarrow.fs import PyFileSystem

        return PyFileSystem(DeltaStorageHandler(uri))


def _plain_schema(table: Any) -> pa.Schema:
    return pa.schema([_plain_field(field) for field in pa.schema(table.schema().to_arrow())])


def _physical_schema(logical: pa.Schema, delta_schema: str) -> pa.Schema:
    """``logical`` with every field, nested ones too, under the physical name the table's schema gives it."""
    fields = {field["name"]: field for field in json.loads(delta_schema)["fields"]}
    return pa.schema([_physical_field(field, fields.get(field.name)) for field in logical])


def _physical_field(field: pa.Field, described: Any) -> pa.Field:
    if not isinstance(described, dict):
        return field
    name = (described.get("metadata") or {}).get(PHYSICAL_NAME, field.name)
    return pa.field(name, _physical_type(field.type, described.get("type")), field.nullable)


def _physical_type(data_type: pa.DataType, described: Any) -> pa.DataType:
    if not isinstance(described, dict):
        return data_type
    if pa.types.is_struct(data_type) and described.get("type") == "struct":
        children = {child["name"]: child for child in described.get("fields", [])}
        return pa.struct([_physical_field(child, children.get(child.name)) for child in data_type])
    if (pa.types.is_list(data_type) or pa.types.is_large_list(data_type)) and described.get("type") == "array":
        element = data_type.value_field.with_type(_physical_type(data_type.value_type, described.get("elementType")))
        return pa.list_(element) if pa.types.is_list(data_type) else pa.large_list(element)
    if pa.types.is_map(data_type) and described.get("type") == "map":
        key = data_type.key_field.with_type(_physical_type(data_type.key_type, described.get("keyType")))
        item = data_type.item_field.with_type(_physical_type(data_type.item_type, described.get("valueType")))
        return pa.map_(key, item)
    return data_type


def _logical_batch(batch: pa.RecordBatch, logical: pa.Schema) -> pa.RecordBatch:
    """A batch read under physical names, under ``logical``'s names (the same layout: a zero-copy view)."""
    return pa.RecordBatch.from_arrays(
        [column.view(field.type) for column, field in zip(batch.columns, logical)], schema=logical
    )


def maps_column_names(table: Any) -> bool:
    """Whether a delta-rs table stores its columns under physical names (``delta.columnMapping.mode`` ``name`` or
    ``id``: what Databricks sets once a column is renamed or dropped). delta-rs's Arrow reader looks the logical
    names up in the files and reads every value as NULL; its query engine maps them."""
    configuration = table.metadata().configuration or {}
    return str(configuration.get(COLUMN_MAPPING_PROPERTY, "none")).strip().lower() not in ("", "none")


def _queried(table: Any) -> pa.RecordBatchReader:
    """Every column of the table through delta-rs's query engine (DataFusion), asked for in the plain types of
    the table's schema (the engine's own are view types, which pyarrow before 16 cannot import)."""
    from deltalake import QueryBuilder
    from deltalake.exceptions import DeltaError

    schema = pa.schema([_plain_field(field) for field in pa.schema(table.schema().to_arrow())])
    listed = ", ".join('"' + name.replace('"', '""') + '"' for name in schema.names)
    try:
        builder = QueryBuilder().register("snapshot", table)
    except DeltaError as err:
        raise_unsupported_features(table, err)
        raise
    return _stream_reader(builder.execute(f"SELECT {listed} FROM snapshot"), schema)


class UnsupportedTableFeatureError(ValueError):
    """A Delta table needs a reader feature delta-rs cannot read (e.g. ``typeWidening``)."""


def refuse_unread_features(table: Any) -> None:
    """Raise `UnsupportedTableFeatureError` when a local table needs a reader feature outside
    `LOCAL_READER_FEATURES`."""
    needed = sorted(table.protocol().reader_features or ())
    unread = [feature for feature in needed if feature not in LOCAL_READER_FEATURES]
    if unread:
        _refuse_features(table, ", ".join(name[:1].upper() + name[1:] for name in unread), ", ".join(needed))


def raise_unsupported_features(table: Any, err: BaseException) -> None:
    """Raise `UnsupportedTableFeatureError` naming the table, its version and the features when ``err`` is
    delta-rs's refusal of the table's features; return otherwise."""
    marker = "Unsupported table features required:"
    text = str(err)
    if marker not in text:
        return
    features = text.split(marker, 1)[1].strip().splitlines()[0].strip(" []")
    _refuse_features(table, features, ", ".join(sorted(table.protocol().reader_features or ())) or "none listed")


def _refuse_features(table: Any, features: str, needed: str) -> NoReturn:
    from deltalake import __version__ as deltalake_version

    raise UnsupportedTableFeatureError(
        f"Version {table.version()} of the Delta table {table.table_uri} needs the table feature {features} "
        f"(its reader features: {needed}), which delta-rs (deltalake {deltalake_version}) cannot read. Choices: "
        f"read it by name with Spark's Delta reader (streaming.spark.incremental_to_mds or dataframe_to_mds in a "
        f"Delta-enabled SparkSession)."
    ) from None


def _read_stream(stream: Any, schema: pa.Schema) -> pa.Table:
    """An Arrow C stream (what delta-rs returns) as a table of ``schema`` (see `_stream_reader`)."""
    return _stream_reader(stream, schema).read_all()


def _stream_reader(stream: Any, schema: pa.Schema) -> pa.RecordBatchReader:
    """An Arrow C stream as batches of ``schema``, asked of the stream itself: delta-rs hands view types
    (``string_view``), which pyarrow before 16 cannot import (nor has it ``from_stream``)."""
    if hasattr(pa.RecordBatchReader, "from_stream"):
        return pa.RecordBatchReader.from_stream(stream, schema=schema)
    capsule = stream.__arrow_c_stream__(schema.__arrow_c_schema__())
    return pa.RecordBatchReader._import_from_c_capsule(capsule)


def _plain_field(field: pa.Field) -> pa.Field:
    views = (
        (getattr(pa.types, "is_string_view", None), pa.string()),
        (getattr(pa.types, "is_binary_view", None), pa.binary()),
    )
    for is_view, plain in views:
        if is_view is not None and is_view(field.type):
            return field.with_type(plain)
    return field


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with view types (which delta-rs may return) as their plain counterparts."""
    target = pa.schema([_plain_field(item) for item in table.schema])
    return table if target == table.schema else table.cast(target)


def _schema_string(table: Any) -> str | None:
    """The table's schema as the Delta log writes it (``schemaString``), to compare with later ``metaData``."""
    try:
        return normal_schema(table.schema().to_json())
    except Exception:  # noqa: BLE001 - only used to tell schema changes apart; unknown is handled
        return None


def _partition_expression(action: FileAction, partitions: list[str], schema: pa.Schema) -> ds.Expression | None:
    """The partition values of a file as a dataset expression (so the dataset fills those columns).

    A file's partition columns are those its own action names, not the pinned version's: an overwrite may have
    partitioned the table otherwise, and a file it removed holds none of the columns it was partitioned by."""
    values = action.partition_values
    names = [name for name in (values if values is not None else partitions) if name in schema.names]
    if not names:
        return None
    if values is None:
        raise FilesNotReadable(f"the log gives no partition values for {action.path}")
    expression = None
    for name in names:
        text = values.get(name)
        field_type = schema.field(name).type
        # The protocol reads an empty partition value as NULL, whatever the column's type.
        term = pc.field(name).is_null() if not text else pc.field(name) == _partition_scalar(text, field_type)
        expression = term if expression is None else expression & term
    return expression


def _partition_scalar(text: str, data_type: pa.DataType) -> pa.Scalar:
    """A partition value as the Delta log writes it (text) in the column's type."""
    if pa.types.is_timestamp(data_type):
        plain = pa.scalar(text.replace("T", " ").rstrip("Z")).cast(pa.timestamp("us"))
        return plain.cast(pa.timestamp("us")).cast(data_type) if data_type.tz is None else _as_utc(plain, data_type)
    if pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return pa.scalar(text.encode("utf-8"), data_type)
    return pa.scalar(text).cast(data_type)


def _as_utc(plain: pa.Scalar, data_type: pa.DataType) -> pa.Scalar:
    return pa.scalar(plain.value, pa.timestamp("us", tz="UTC")).cast(data_type)


def _version_of_missing(err: BaseException, actions: Sequence[tuple[FileAction, int]]) -> int:
    text = str(err)
    for action, version in actions:
        if unquote(action.path) in text:
            return version
    return min(version for _, version in actions)


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
