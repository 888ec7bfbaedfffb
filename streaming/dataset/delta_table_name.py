"""A stream's remote given as a table name (``catalog.schema.table``): the table's location, as the active Spark
session resolves it.

A remote is a table name when it is no path or URL (`streaming.delta.location.looks_like_path`) and parses as two
or three parts, each a bare word or in backticks (`table_name_parts`). Such a name is resolved once, where the
dataset is built, with ``DESCRIBE DETAIL``: its ``location`` becomes the stream's remote, which DataLoader
workers (without a session) then read like any Delta table's folder. pyspark is imported only when already
imported: without it nothing can have started a session, and code that reads shards never needs it.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

from streaming.delta.location import looks_like_path, quote_table_name, table_name_parts
from streaming.format.index import get_index_basename
from streaming.storage.local import local_path
from streaming.storage.untrusted_text import shown
from streaming.storage.url import is_remote

if TYPE_CHECKING:
    from streaming.dataset.stream import Stream

#: A part of a table name that is not in backticks.
_BARE_PART = re.compile(r"\w+")


class TableNameError(ValueError):
    """A remote that is a table name cannot be resolved to a Delta table's location (the message says why)."""


def table_name(remote: str | None) -> list[str] | None:
    """The parts of ``remote`` when it is a table name (see the module docstring), else None."""
    if not remote or looks_like_path(remote):
        return None
    try:
        parts = table_name_parts(remote)
    except ValueError:
        return None
    if not 2 <= len(parts) <= 3:
        return None
    # Without backticks every part is a plain word (``schema.table``), as SQL reads a name: ``data.v1-2`` is a path.
    if "`" not in remote and not all(_BARE_PART.fullmatch(part) for part in parts):
        return None
    return parts


def active_spark_session() -> Any:
    """The active Spark session of this thread (classic, else Spark Connect), None without one."""
    if "pyspark.sql" not in sys.modules:
        return None  # nothing imported pyspark's SQL module: no session can exist
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        return session
    connect = sys.modules.get("pyspark.sql.connect.session")
    return None if connect is None else connect.SparkSession.getActiveSession()


def table_location(name: str) -> str:
    """The location of the Delta table ``name`` (not a view, not a table of another format), from the active Spark
    session's ``DESCRIBE DETAIL``.

    Raises:
        TableNameError: no active session, no such table, a view, or a table that is not a Delta table.
    """
    session = active_spark_session()
    if session is None:
        raise TableNameError(
            f"The remote {shown(name)} is neither a path nor a URL here, so it is read as a table name, which needs "
            f"an active Spark session to find its location: start one (or run where one is), or give the table's "
            f"location as the remote (DESCRIBE DETAIL {shown(name)} shows it)."
        )
    identifier = quote_table_name(name)
    from pyspark.errors import PySparkException

    try:
        table = session.catalog.getTable(identifier)
    except PySparkException as err:
        raise TableNameError(
            f"The remote {shown(name)} is neither a path nor a URL here, and the Spark session has no table of that "
            f"name ({type(err).__name__}); give the table's folder or URL, or the name of a Delta table."
        ) from err
    if table.isTemporary or (table.tableType or "").upper() in ("VIEW", "MATERIALIZED_VIEW", "TEMPORARY"):
        raise TableNameError(
            f"{shown(name)} is a view ({table.tableType}): a stream reads a Delta table's files, so give the name "
            f"or location of the Delta table the view reads."
        )
    detail = session.sql(f"DESCRIBE DETAIL {identifier}").collect()[0].asDict()
    if str(detail.get("format") or "").lower() != "delta":
        raise TableNameError(
            f"The table {shown(name)} is a {shown(str(detail.get('format')))} table, not a Delta table; a stream "
            f"reads Delta tables by name (a folder of Parquet files by its location)."
        )
    location = detail.get("location")
    if not isinstance(location, str) or not location:
        raise TableNameError(f"DESCRIBE DETAIL of the Delta table {shown(name)} gives no location.")
    # Local Spark spells a local folder ``file:/path``: the stream's remote is then the path.
    return location if is_remote(location) else local_path(location)


def resolve_table_name(stream: Stream) -> None:
    """Make a stream whose remote is a table name read the table's location (see the module docstring).

    A stream whose explicit ``local`` folder already holds an MDS index keeps its remote as given: upstream reads
    that index without looking at the remote."""
    if table_name(stream.remote) is None:
        return
    if stream._local is not None and os.path.exists(stream.local_path(get_index_basename())):
        return
    assert stream.remote is not None  # a table name
    stream.remote = table_location(stream.remote)
