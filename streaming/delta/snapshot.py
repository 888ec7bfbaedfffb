"""A Delta table pinned to one version: its metadata, protocol, schema and list of data files.

The first of the package's three seams (`snapshot`, `streaming.delta.scan`, `streaming.delta.changes_between`), after
delta-kernel's ``Snapshot``. It is built from one read of the log (`streaming.delta.log_replay`: the newest
checkpoint at or before the version, classic or V2 with sidecars, and the commits after it), which also pins the
version; the changes between it and an older version reuse the commits that read passed (`log`). delta-rs is used
only to turn the log's schema into Arrow types. Every file of the table is read through `filesystem`: for a local
table one that opens each file by descriptor without following a link (`streaming.storage.table_files`), for a
remote one delta-rs's own object store (its credentials, its paths).
"""

from __future__ import annotations

import json
import os
from typing import Any, NoReturn
from urllib.parse import unquote

import pyarrow as pa

from streaming._extras import require
from streaming.delta.column_mapping import ColumnMapping, mapping_mode
from streaming.delta.errors import DeltaLogError, FilesNotReadableError, NoColumnsError, UnsupportedTableFeatureError
from streaming.delta.history import CDF_PROPERTY, FileAction, normal_schema
from streaming.delta.log_replay import LogState, metadata_schema, replay
from streaming.delta.row_ids import RowTracking, row_tracking
from streaming.delta.variant import text_schema
from streaming.storage.table_files import check_table_files, inside_path, table_filesystem
from streaming.storage.untrusted_text import shown
from streaming.storage.url import is_remote, split_url

#: The reader features of the Delta protocol this package's reader implements (column mapping's physical names,
#: deletion vectors, plain timestamps, type widening and variants in `streaming.delta.scan`, V2 checkpoints in
#: `streaming.delta.log_replay`; the other one changes nothing a reader does). Any other one is refused, as the
#: protocol asks of a reader that lacks it.
READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "typeWidening",
        "typeWidening-preview",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "variantShredding-preview",
        "variantType",
        "variantType-preview",
    }
)


class Snapshot:
    """The Delta table at ``uri`` pinned to the version of ``log`` (see `open`)."""

    def __init__(self, uri: str, log: LogState, filesystem: Any) -> None:
        self.uri = uri
        self.log = log
        self.version: int = log.version
        self._filesystem = filesystem
        metadata, protocol = log.metadata, log.protocol
        self.configuration: dict[str, str] = {
            str(key): str(value) for key, value in dict(metadata.get("configuration") or {}).items()
        }
        self.partition_columns: list[str] = [str(name) for name in metadata.get("partitionColumns") or ()]
        self.reader_features: list[str] = sorted(protocol.get("readerFeatures") or ())
        self.writer_features: list[str] = sorted(protocol.get("writerFeatures") or ())
        self.delta_schema: str = metadata_schema(metadata)
        try:
            arrow = arrow_schema(self.delta_schema, uri, self.version)
            self.schema: pa.Schema = text_schema(arrow, self.delta_schema)  # a VARIANT as its JSON text
        except DeltaLogError:
            self.check_readable()  # a feature this reader lacks is the clearer reason
            raise
        self.mapping = ColumnMapping(mapping_mode(self.configuration), self.schema, self.delta_schema)

    @classmethod
    def open(cls, uri: str, version: int | None = None) -> Snapshot:
        """The table at ``version`` (the latest when None), its data files checked (no link is followed).

        Raises `HistoryUnavailableError` when the log no longer reaches ``version`` (log cleanup removed the
        commit files its replay needs), `DeltaLogError` for a folder that is not a Delta table or a version past
        the newest, `NoColumnsError` for a version whose schema has no columns."""
        require("deltalake", "delta", "Reading a Delta table without Spark")
        filesystem = table_filesystem(uri) or object_store(uri)
        log = replay(filesystem, lambda relative: _read_text(filesystem, relative), uri, version)
        check_table_files(uri, [action.path for action in log.files.values()])
        return cls(uri, log, filesystem)

    @property
    def feed_enabled(self) -> bool:
        """Whether the Change Data Feed is on at this version."""
        return str(self.configuration.get(CDF_PROPERTY, "")).lower() == "true"

    @property
    def schema_string(self) -> str | None:
        """The schema as the log writes it, in one spelling (`normal_schema`), to compare with later ``metaData``."""
        return normal_schema(self.delta_schema)

    @property
    def filesystem(self) -> Any:
        """A pyarrow filesystem rooted at the table (see the module docstring)."""
        return self._filesystem

    def read_text(self, relative: str) -> str | None:
        """The text of the file ``relative`` to the table (None when missing)."""
        return _read_text(self._filesystem, relative)

    def files(self) -> list[FileAction]:
        """The version's data files, each as its latest ``add`` action (from the one read of the log)."""
        return list(self.log.files.values())

    def feed_enabled_at(self, version: int) -> bool | None:
        """Whether the Change Data Feed was on at ``version`` when this snapshot's read of the log passed it
        (None: not known from that read)."""
        metadata = self.log.metadata_at(version)
        if metadata is None:
            return None
        return str(dict(metadata.get("configuration") or {}).get(CDF_PROPERTY, "")).lower() == "true"

    def schema_string_at(self, version: int) -> str | None:
        """The schema at ``version`` (`normal_schema`) when this snapshot's read of the log passed it, else None."""
        metadata = self.log.metadata_at(version)
        return None if metadata is None else normal_schema(metadata_schema(metadata))

    def null_counts(self, names: list[str]) -> dict[str, int]:
        """Top-level NULL counts of ``names`` from the files' statistics (``nullCount``, by physical name), for the
        columns every file has one for. A count covers a file's rows before its deletion vector: at most too high."""
        counts = dict.fromkeys(names, 0)
        for action in self.log.files.values():
            try:
                stats = json.loads(action.stats) if action.stats else None
            except (ValueError, RecursionError):
                stats = None
            nulls = stats.get("nullCount") if isinstance(stats, dict) else None
            for name in list(counts):
                value = nulls.get(self.mapping.physical_name(name)) if isinstance(nulls, dict) else None
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    counts[name] += value
                else:
                    del counts[name]  # a file without its count: the engine counts this column
        return counts

    def row_tracking(self) -> RowTracking | None:
        """The table's row tracking (`streaming.delta.row_ids`), None without."""
        return row_tracking(self.configuration, self.writer_features)

    def data_path(self, path: str) -> str:
        """A data file's path under `filesystem` from the path the log gives it."""
        if not is_remote(self.uri):
            return inside_path(self.uri, path)  # UnsafePathError for a file outside the table
        if "://" in path or path.startswith("/"):
            raise FilesNotReadableError(f"{path} lies outside the table's folder (a shallow clone)")
        return unquote(path)

    def check_readable(self) -> None:
        """Raise `UnsupportedTableFeatureError` when the version needs a reader feature outside `READER_FEATURES`."""
        unread = [feature for feature in self.reader_features if feature not in READER_FEATURES]
        if unread:
            self._refuse(", ".join(name[:1].upper() + name[1:] for name in unread))

    def _refuse(self, features: str) -> NoReturn:
        from deltalake import __version__ as deltalake_version

        raise UnsupportedTableFeatureError(
            f"Version {self.version} of the Delta table {self.uri} needs the table feature {features} (its reader "
            f"features: {', '.join(self.reader_features)}), which delta-rs (deltalake {deltalake_version}) cannot "
            f"read. Choices: read it by name with Spark's Delta reader (streaming.spark.incremental_to_mds or "
            f"dataframe_to_mds in a Delta-enabled SparkSession)."
        ) from None


def _read_text(filesystem: Any, relative: str) -> str | None:
    try:
        with filesystem.open_input_stream(relative) as stream:
            return stream.read().decode("utf-8")
    except FileNotFoundError:
        return None


def object_store(uri: str) -> Any:
    """A pyarrow filesystem over delta-rs's own object store for a remote table; for one on ``dbfs:/`` or a
    ``/Volumes/...`` path the Files API serves, which delta-rs does not reach, over the package's own storage
    (`streaming.storage.storage_files`)."""
    from deltalake.fs import DeltaStorageHandler
    from pyarrow.fs import PyFileSystem

    if split_url(uri).scheme in ("dbfs", "", "file"):
        from streaming.storage.storage_files import storage_filesystem

        return storage_filesystem(uri)

    return PyFileSystem(DeltaStorageHandler(uri, store_options(uri)))


def store_options(uri: str) -> dict[str, str]:
    """delta-rs's options for ``uri`` from what this package's own S3 storage reads: an S3 endpoint named by
    ``S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL_S3`` (delta-rs itself reads only ``AWS_ENDPOINT_URL``), over plain HTTP
    when the endpoint says so. Credentials stay where delta-rs finds them itself."""
    if not uri.startswith(("s3://", "s3a://")) or os.environ.get("AWS_ENDPOINT_URL"):
        return {}
    endpoint = os.environ.get("S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
    if not endpoint:
        return {}
    options = {"AWS_ENDPOINT_URL": endpoint}
    if endpoint.startswith("http://"):
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def arrow_schema(delta_schema: str, uri: str, version: int) -> pa.Schema:
    """The Arrow schema of a ``schemaString`` (delta-rs's mapping of Delta's types), view types made plain;
    `NoColumnsError` for a schema without columns (delta-rs's reader would end in a native backtrace)."""
    from deltalake import Schema

    try:
        schema = pa.schema(Schema.from_json(delta_schema).to_arrow())
    except Exception as err:  # noqa: BLE001 - delta-rs's own errors for an unreadable schema have no common type
        raise DeltaLogError(
            f"The schema of version {version} of the Delta table {shown(uri)} cannot be read "
            f"({type(err).__name__}); the table's log is damaged."
        ) from None
    if not len(schema):
        raise NoColumnsError(
            f"Version {version} of the Delta table {shown(uri)} has no columns, so it has nothing to convert."
        )
    return pa.schema([plain_field(field) for field in schema])


def plain_field(field: pa.Field) -> pa.Field:
    """``field`` with a view type (which delta-rs may give) as its plain counterpart."""
    views = (
        (getattr(pa.types, "is_string_view", None), pa.string()),
        (getattr(pa.types, "is_binary_view", None), pa.binary()),
    )
    for is_view, plain in views:
        if is_view is not None and is_view(field.type):
            return field.with_type(plain)
    return field


def first_line(err: BaseException) -> str:
    """An error's first line for a message (its type's name when it has no text)."""
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
