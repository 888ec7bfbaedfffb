"""A Delta table pinned to one version: its metadata, protocol, schema and list of data files.

The first of the package's three seams (`snapshot`, `streaming.delta.scan`, `streaming.delta.changes_between`), after
delta-kernel's ``Snapshot``. delta-rs pins the version (`streaming.delta.opening`: only once the checkpoint it
decodes is bounded) and gives the metadata, protocol and schema; the data files, with what delta-rs does not give
(deletion vectors, ``baseRowId``), come from this package's own replay of the log (`streaming.delta.row_ids`),
read once, when first asked for. Every file of the table is read through `filesystem`: for a local table one that
opens each file by descriptor without following a link (`streaming.storage.table_files`), for a remote one
delta-rs's own object store (its credentials, its paths).
"""

from __future__ import annotations

from typing import Any, NoReturn
from urllib.parse import unquote

import pyarrow as pa

from streaming._extras import require
from streaming.delta.column_mapping import ColumnMapping, mapping_mode
from streaming.delta.errors import (
    FilesNotReadableError,
    HistoryUnavailableError,
    RowIdsUnavailableError,
    UnsupportedTableFeatureError,
)
from streaming.delta.history import CDF_PROPERTY, FileAction, normal_schema
from streaming.delta.opening import open_delta_table
from streaming.delta.row_ids import RowTracking, live_files, row_tracking
from streaming.delta.variant import text_schema
from streaming.storage.table_files import check_table_files, inside_path, table_filesystem
from streaming.storage.url import is_remote

#: The reader features of the Delta protocol this package's reader implements (column mapping's physical names,
#: deletion vectors, plain timestamps, type widening and variants in `streaming.delta.scan`; the other two change
#: nothing a reader does). Any other one is refused, as the protocol asks of a reader that lacks it.
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
    """The Delta table at ``uri`` pinned to ``version`` (see `open`)."""

    def __init__(self, uri: str, table: Any) -> None:
        self.uri = uri
        self.table = table  # delta-rs's DeltaTable at the pinned version
        self.version: int = table.version()
        metadata = table.metadata()
        self.configuration: dict[str, str] = dict(metadata.configuration or {})
        self.partition_columns: list[str] = list(metadata.partition_columns)
        protocol = table.protocol()
        self.reader_features: list[str] = sorted(protocol.reader_features or ())
        self.writer_features: list[str] = sorted(protocol.writer_features or ())
        self.delta_schema: str = table.schema().to_json()
        arrow = pa.schema([plain_field(field) for field in pa.schema(table.schema().to_arrow())])
        self.schema: pa.Schema = text_schema(arrow, self.delta_schema)  # a VARIANT as its JSON text
        self.mapping = ColumnMapping(mapping_mode(self.configuration), self.schema, self.delta_schema)
        self._filesystem: Any = None
        self._files: list[FileAction] | None = None

    @classmethod
    def open(cls, uri: str, version: int | None = None) -> Snapshot:
        """The table at ``version`` (the latest when None), its data files checked (no link is followed).

        Raises `HistoryUnavailableError` when the log no longer reaches ``version`` (delta-rs's
        ``TableNotFoundError``: log cleanup removed its commit files)."""
        # Through `require`, the first deltalake import of a run: without it, the error names the delta extra.
        TableNotFoundError = require(
            "deltalake.exceptions", "delta", "Reading a Delta table without Spark"
        ).TableNotFoundError

        try:
            table = open_delta_table(uri, version)
        except TableNotFoundError as err:
            if version is None:
                raise
            raise HistoryUnavailableError(
                f"version {version} of {uri} is no longer in the table's log ({first_line(err)}; Delta removes "
                f"commit files older than the table's delta.logRetentionDuration when it writes a checkpoint)",
                version,
            ) from None
        check_table_files(uri, table.file_uris())
        return cls(uri, table)

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
        if self._filesystem is None:
            self._filesystem = table_filesystem(self.uri) or _object_store(self.uri)
        return self._filesystem

    def read_text(self, relative: str) -> str | None:
        """The text of the file ``relative`` to the table (None when missing)."""
        try:
            with self.filesystem.open_input_stream(relative) as stream:
                return stream.read().decode("utf-8")
        except FileNotFoundError:
            return None

    def files(self) -> list[FileAction]:
        """The version's data files (each as its latest ``add`` action), replayed from the log once.

        Raises `FilesNotReadableError` for a log kept in V2 checkpoints with sidecar files, which is not replayed
        here, and `HistoryUnavailableError` when a commit file the replay needs is gone."""
        if self._files is None:
            try:
                self._files = live_files(self.filesystem, self.read_text, self.version, self.uri)
            except RowIdsUnavailableError as err:
                raise FilesNotReadableError(f"the files of {self.uri} cannot be listed here: {err}") from None
        return self._files

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


def _object_store(uri: str) -> Any:
    """A pyarrow filesystem over delta-rs's own object store for a remote table."""
    from deltalake.fs import DeltaStorageHandler
    from pyarrow.fs import PyFileSystem

    return PyFileSystem(DeltaStorageHandler(uri))


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
