"""The one interface every reader of a Delta table implements for the incremental job, and how a run picks one.

The appliers (`streaming.incremental.append`, `streaming.incremental.mirror`) use a reader only through this
interface: no reader's name is compared, no reader's class is checked, nothing else of it is called. It has three
jobs, one protocol each, which `TableReader` joins:

* `TableRows`, reading: the pinned version's columns and their encodings, its rows, the history of a window of
  versions (`streaming.delta.history`), and, given that window, its Change Data Feed and the rows of the data files
  it added and removed (deletion vectors applied); both versions whole where the window cannot be read;
* `RowArithmetic`, rows compared by row identity (`streaming.convert.row_identity`): the net of two sets of rows,
  the rows left after cancelling the dataset's, key digests, a mirror's resync;
* `RowWriter`: the writing of rows into a dataset folder.

A reader of a table with Delta row tracking also gives each row its stable row id. Two readers exist: delta-rs's
(`streaming.incremental.deltalake_reader`, rows as Arrow tables on the driver) and Spark's Delta reader
(`streaming.spark.table_changes`, rows as DataFrames). The caller of the job chooses one with a `ReaderChoice`,
which also checks, before any read, that the chosen engine can write to the dataset.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from streaming.convert.driver import ConversionResult
from streaming.delta.history import TableWindow

Columns = Mapping[str, str] | Sequence[str] | None
#: A way to the key values of chosen rows (by their positions), to name duplicate keys in an error.
KeyValues = Callable[[list[int]], list[dict]]


class TableRows(Protocol):
    """A Delta table pinned to ``version``, read by one engine (named by ``reader``, as a run's record names it)."""

    table: str
    version: int
    reader: str
    #: Whether each row carries its Delta row id in the column `streaming.delta.row_ids.ROW_ID`.
    row_ids: bool
    #: Why this reader gives no row ids (said when a mirror without ``key`` needs them).
    no_row_ids: str

    def column_names(self) -> list[str]:
        """The table's columns at the pinned version."""
        ...

    def encodings(self, chosen: Columns) -> dict[str, str]:
        """``{name: encoding}`` for the ``columns`` argument ``chosen`` (every column when None), checked."""
        ...

    def version_rows(self) -> Any:
        """Every row of the pinned version."""
        ...

    def window(self, start: int) -> TableWindow:
        """The history of versions ``start + 1 ..`` the pinned one (`HistoryUnavailableError` when gone)."""
        ...

    def feed(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        """The Change Data Feed of ``window``: the rows it adds and the rows it takes away."""
        ...

    def files(self, window: TableWindow, columns: Sequence[str]) -> tuple[Any, Any]:
        """The rows of the data files ``window`` added and of those it removed."""
        ...

    def full(self, start: int, columns: Sequence[str]) -> tuple[Any, Any]:
        """Both versions whole, the pinned one's rows and ``start``'s: the change where no window of it can be
        read, so it takes the version the window would have started after."""
        ...

    def with_row_ids(self) -> TableReader | None:
        """This table read with its rows' Delta row ids, or None when this reader cannot give them."""
        ...


class RowArithmetic(Protocol):
    """Rows compared by row identity, in the reader's own form of rows."""

    def net(self, plus: Any, minus: Any, encodings: Mapping[str, str]) -> tuple[Any, int]:
        """The rows of ``plus`` no row of ``minus`` cancels (None when there are none), and how many rows of
        ``minus`` no row of ``plus`` cancels."""
        ...

    def net_rows(self, plus: Any, minus: Any, encodings: Mapping[str, str]) -> tuple[Any, Any]:
        """As `net`, with the uncancelled rows of ``minus`` themselves instead of their count."""
        ...

    def subtract(self, stored: Counter, columns: Sequence[str], encodings: Mapping[str, str]) -> Any:
        """The pinned version's rows left after cancelling the multiset of row identities ``stored`` (None:
        none left)."""
        ...

    def key_digests(self, rows: Any, key: Mapping[str, str]) -> tuple[list[bytes], KeyValues]:
        """Each row's key digest (`streaming.convert.key_map`), and a way to the key values of chosen rows."""
        ...

    def resync_mirror(
        self, stored: Iterable[tuple[bytes, bytes]], columns: Sequence[str], encodings: Mapping[str, str]
    ) -> tuple[Any, list[bytes]]:
        """A mirror's resync against the dataset's samples ``stored`` (each its row identity and key digest): the
        pinned version's rows no sample holds (None: none), and the key digests of the samples it lacks."""
        ...


class RowWriter(Protocol):
    def write(self, rows: Any, out: str, **options: Any) -> ConversionResult:
        """Convert ``rows`` into the dataset folder ``out`` (``dataframe_to_mds``'s options that apply)."""
        ...


class TableReader(TableRows, RowArithmetic, RowWriter, Protocol):
    """Everything the appliers use of a reader."""


class ReaderChoice(Protocol):
    """The engine a run reads its table with, chosen by the job's caller before anything is read."""

    #: The reader's name, as `TableRows.reader`.
    reader: str
    #: Whether its readers can resync a mirror (`RowArithmetic.resync_mirror`), which reads the version whole.
    resyncs_mirror: bool

    def check_destination(self, url: str, executor_env: Mapping[str, str] | None) -> None:
        """Fail, naming what is missing, when this engine's writers cannot write to the dataset at ``url``."""
        ...

    def open(self, table: str, version: int | None) -> TableReader:
        """The reader of ``table`` pinned to ``version`` (the latest when None), without reading any row."""
        ...
