"""What to convert: a DataFrame as given, a table by name, or a Delta table by path, pinned to one version.

For a Delta table the version is fixed before reading, so the recorded version is exactly the data
converted: Spark reads it with ``versionAsOf``; where Spark has no Delta support (no Delta jars, as on a
plain ``pip install pyspark``) the ``deltalake`` package reads it instead. Tables that are not Delta
tables are read as they are and have no version.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from streaming._extras import install_hint
from streaming.convert.source import Source
from streaming.delta.location import looks_like_path, quote_table_name
from streaming.storage.table_files import refuse_links_in

# How Spark (and Databricks) say that DESCRIBE HISTORY was asked of something that is not a Delta table.
NOT_DELTA_ERRORS = (
    "DELTA_ONLY_OPERATION",
    "DELTA_MISSING_DELTA_TABLE",
    "EXPECT_TABLE_NOT_VIEW",
    "is not a Delta table",
    "only supported for Delta tables",
)


def is_dataframe(obj: Any) -> bool:
    """Whether ``obj`` is a classic or a Spark Connect DataFrame."""
    return hasattr(obj, "mapInArrow") and hasattr(obj, "schema")


def active_session(spark: Any = None) -> Any:
    """The session to read tables with: the one given, else the active one."""
    if spark is not None:
        return spark
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise ValueError("Reading a table needs a SparkSession: pass spark=... or create one first.")
    return session


def resolve(data: Any, spark: Any = None, version: int | None = None) -> tuple[Any, Source]:
    """Turn the ``data`` argument of ``dataframe_to_mds`` into a DataFrame and a description of it."""
    if is_dataframe(data):
        if version is not None:
            raise ValueError(
                "`version` applies to a table name or a Delta path, not to a DataFrame; read the "
                "version you want first (e.g. spark.read.option('versionAsOf', v).table(name))."
            )
        return data, Source("dataframe")
    if not isinstance(data, str) or not data:
        raise TypeError(
            f"Expected a DataFrame, a table name or a Delta table path, got {type(data).__name__} {data!r:.80}."
        )
    session = active_session(spark)
    if looks_like_path(data):
        return _read_delta_path(session, data, version)
    return _read_table(session, data, version)


def sql_identifier(table: str) -> str:
    """The SQL identifier of a table name or a Delta table path (``delta.`path` ``)."""
    if looks_like_path(table):
        return "delta.`" + table.replace("`", "``") + "`"
    return quote_table_name(table)


def _not_a_delta_table(err: Exception) -> bool:
    """Whether DESCRIBE HISTORY failed because the table is not a Delta table (or Spark has no Delta support)."""
    text = str(err)
    # The identifier is quoted, so a syntax error means Spark's grammar lacks DESCRIBE HISTORY: no Delta extension.
    return "PARSE_SYNTAX_ERROR" in text or any(marker in text for marker in NOT_DELTA_ERRORS)


def latest_version(session: Any, identifier: str) -> int | None:
    """The newest version of a Delta table, or None if it is not a Delta table; any other failure is raised."""
    try:
        rows = session.sql(f"DESCRIBE HISTORY {identifier} LIMIT 1").collect()
    except Exception as err:
        if _not_a_delta_table(err):
            return None
        raise
    return int(rows[0]["version"]) if rows else None


def spark_reads_delta(session: Any, path: str) -> bool:
    """Whether Spark reads Delta tables here (False without Delta jars, where delta-rs reads them instead)."""
    try:
        session.read.format("delta").load(path).schema  # noqa: B018 - resolves the data source now
    except Exception as err:
        if "DATA_SOURCE_NOT_FOUND" in str(err) or "Failed to find the data source" in str(err):
            return False
        raise
    return True


def _read_table(session: Any, name: str, version: int | None) -> tuple[Any, Source]:
    identifier = quote_table_name(name)
    pinned = version if version is not None else latest_version(session, identifier)
    if pinned is None:
        return session.read.table(identifier), Source("table", name, None, "spark")
    return session.read.option("versionAsOf", pinned).table(identifier), Source("table", name, pinned, "spark")


def _read_delta_path(session: Any, path: str, version: int | None) -> tuple[Any, Source]:
    refuse_links_in(path)  # the JVM opens the table's files by path, following links
    try:
        reader = session.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        frame = reader.load(path)
        frame.schema  # noqa: B018 - resolves the data source now, so a missing Delta jar fails here
    except Exception as err:
        if "DATA_SOURCE_NOT_FOUND" not in str(err) and "Failed to find the data source" not in str(err):
            raise
        return _read_with_deltalake(session, path, version)
    pinned = version if version is not None else latest_version(session, sql_identifier(path))
    if version is None and pinned is not None:
        frame = session.read.format("delta").option("versionAsOf", pinned).load(path)
    return frame, Source("delta", path, pinned, "spark")


def _read_with_deltalake(session: Any, path: str, version: int | None) -> tuple[Any, Source]:
    """Read a Delta table with delta-rs and hand it to Spark (through Arrow, so it also works on Connect)."""
    if importlib.util.find_spec("deltalake") is None:
        raise ImportError(
            "Spark has no Delta support here; reading a Delta path then needs the `deltalake` "
            f"package, from the delta extra. {install_hint('delta')}"
        )
    from streaming.delta.scan import snapshot_rows
    from streaming.delta.snapshot import Snapshot

    snapshot = Snapshot.open(path, version)
    frame = _variants_parsed(session, snapshot_rows(snapshot))
    return frame, Source("delta", path, snapshot.version, "deltalake")


def _variants_parsed(session: Any, rows: Any) -> Any:
    """A DataFrame of delta-rs's ``rows``, whose VARIANT columns are JSON text (``arrow.json``, which Spark's
    Arrow conversion does not take): the text crosses as a string and becomes a VARIANT again with
    ``parse_json`` where Spark has it (4.0 on), so `dataframe_to_mds` stores it as it stores any VARIANT (its
    ``to_json``, the same text); on Spark 3.5 it stays a string."""
    import pyarrow as pa

    texts = [field.name for field in rows.schema if getattr(field.type, "extension_name", None) == "arrow.json"]
    if not texts:
        return frame_from_arrow(session, rows)
    plain = pa.schema([field.with_type(pa.string()) if field.name in texts else field for field in rows.schema])
    frame = frame_from_arrow(session, rows.cast(plain))
    import pyspark

    if int(pyspark.__version__.split(".")[0]) < 4:
        return frame
    from streaming.spark.schema import quote_name

    quoted = [quote_name(name) for name in rows.schema.names]
    return frame.selectExpr(
        *[
            f"parse_json({column}) AS {column}" if name in texts else column
            for name, column in zip(rows.schema.names, quoted)
        ]
    )


def frame_from_arrow(session: Any, table: Any) -> Any:
    """A DataFrame of an Arrow table: directly from Spark 4.0 on; on Spark 3.5 through pandas with Arrow on."""
    import pyspark

    if int(pyspark.__version__.split(".")[0]) >= 4:
        return session.createDataFrame(table)
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    key = "spark.sql.execution.arrow.pyspark.enabled"
    previous = session.conf.get(key, None)
    session.conf.set(key, "true")  # NULLs in integer columns survive pandas only on the Arrow path
    try:
        # Floats as pandas' nullable dtypes, so NaN stays NaN (a plain float column would make it NULL); maps as
        # dicts, the only form Spark 3.5's pandas conversion takes for a MapType value.
        nullable = {pa.float32(): pd.Float32Dtype(), pa.float64(): pd.Float64Dtype()}
        frame = table.to_pandas(types_mapper=nullable.get, maps_as_pydicts="strict")
        return session.createDataFrame(frame, schema=from_arrow_schema(table.schema))
    finally:
        if previous is None:
            session.conf.unset(key)
        else:
            session.conf.set(key, previous)
