"""MosaicML Streaming's Spark converter API (served at `streaming.base.converters`), on `streaming.spark`.

``dataframe_to_mds(dataframe, merge_index, mds_kwargs, udf_iterable, udf_kwargs)`` keeps upstream's
arguments, checks and ``(local, remote)`` return value. Differences, on purpose:

* ByteType and ShortType map to ``int8``/``int16`` (upstream: ``uint8``/``uint16``, which wrapped negative
  values); declaring the old ``uint8``/``uint16`` still works, and a value that does not fit is refused.
* ``mds_kwargs['exist_ok']=True`` replaces a non-empty ``out`` (upstream ignored it, #871); otherwise a
  non-empty ``out`` raises FileExistsError, as upstream.
* Shards go under ``out/<run>/part-<partition>-attempt-<id>/``; only attempts Spark reports as successful
  are indexed, leftovers of failed attempts are deleted, and ``index.json`` basenames are relative to
  ``out`` at any depth (#516). Executors upload and delete each shard as it completes (#970). With
  ``merge_index=False`` each successful attempt's folder sits directly below ``out`` (upstream's layout:
  one sub-directory per partition, ``out/<run>-part-<partition>-attempt-<id>/``).
* With a remote ``out``, ``local`` is a driver temp folder holding a copy of the merged ``index.json``.
* A ``udf_iterable`` receives each Arrow batch as a pandas DataFrame from ``RecordBatch.to_pandas()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from streaming._extras import check_installed

check_installed(("pyspark", "pyarrow"), "spark", "Upstream's Spark converter")

from pyspark.sql import types as T  # noqa: E402 - after the check, so a missing pyspark is explained

from streaming.format.index import INDEX_BASENAME  # noqa: E402
from streaming.spark import dataframe_to_mds as spark_dataframe_to_mds  # noqa: E402
from streaming.storage.dataset_root import DatasetRoot  # noqa: E402
from streaming.storage.out_argument import parse_out  # noqa: E402
from streaming.storage.scratch import make_scratch  # noqa: E402

logger = logging.getLogger(__name__)

SPARK_TO_MDS: dict[T.DataType, str | None] = {
    T.ByteType(): "int8",
    T.ShortType(): "int16",
    T.IntegerType(): "int32",
    T.LongType(): "int64",
    T.FloatType(): "float32",
    T.DoubleType(): "float64",
    T.DecimalType(): "str_decimal",
    T.StringType(): "str",
    T.BinaryType(): "bytes",
    T.BooleanType(): None,
    T.TimestampType(): None,
    T.TimestampNTZType(): None,
    T.DateType(): None,
    T.DayTimeIntervalType(): None,
    T.ArrayType(T.IntegerType()): "ndarray:int32",
    T.ArrayType(T.ShortType()): "ndarray:int16",
    T.ArrayType(T.LongType()): "ndarray:int64",
    T.ArrayType(T.FloatType()): "ndarray:float32",
    T.ArrayType(T.DoubleType()): "ndarray:float64",
}

_BINARY_AS_IS = ("pil", "png", "jpeg", "pkl")
_LEGACY_UNSIGNED = {"uint8": T.ByteType, "uint16": T.ShortType}


def is_json_compatible(data_type: Any) -> bool:
    """Whether values of a Spark type are plain JSON: structs, arrays and string-keyed maps of strings,
    integers, floats, booleans and nulls (LongType and DoubleType do not count, as upstream)."""
    if isinstance(data_type, T.StructType):
        return all(is_json_compatible(field.dataType) for field in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return is_json_compatible(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return isinstance(data_type.keyType, T.StringType) and is_json_compatible(data_type.valueType)
    return isinstance(data_type, (T.StringType, T.IntegerType, T.FloatType, T.BooleanType, T.NullType))


def _mapped_encoding(data_type: T.DataType) -> str:
    """Upstream's automatic mapping of one Spark type; ValueError for the types it does not support."""
    if isinstance(data_type, T.DecimalType):
        encoding: str | None = "str_decimal"
    elif isinstance(data_type, T.ArrayType):  # by element type only: containsNull does not change the encoding
        encoding = SPARK_TO_MDS.get(T.ArrayType(data_type.elementType))
    else:
        encoding = SPARK_TO_MDS.get(data_type)
    if encoding is None:
        raise ValueError(f"{data_type} is not supported by dataframe_to_mds")
    return encoding


def infer_dataframe_schema(dataframe: Any, user_defined_cols: dict[str, Any] | None = None) -> dict[str, str] | None:
    """Map every column to an MDS encoding, or check ``user_defined_cols`` against the DataFrame.

    Returns the mapping when ``user_defined_cols`` is None, else None after the check. Raises ValueError
    for a type without an automatic mapping, an unknown column, or an encoding that does not match.
    """
    schema = dataframe.schema
    if user_defined_cols is None:
        return {field.name: _mapped_encoding(field.dataType) for field in schema.fields}
    supported = {encoding for encoding in SPARK_TO_MDS.values() if encoding}
    for name, encoding in user_defined_cols.items():
        if name not in dataframe.columns:
            raise ValueError(f"{name} is not a column of input dataframe: {dataframe.columns}")
        data_type = schema[name].dataType
        declared = encoding
        if isinstance(encoding, str) and encoding.startswith("ndarray:") and encoding.count(":") == 2:
            declared = encoding.rsplit(":", 1)[0]
        if declared == "json":
            if not is_json_compatible(data_type):
                raise ValueError(f"{name} can not be encoded by MDS JSON.")
            continue
        if declared in _BINARY_AS_IS and isinstance(data_type, T.BinaryType):
            continue
        legacy = _LEGACY_UNSIGNED.get(declared)
        if legacy is not None and isinstance(data_type, legacy):
            continue
        if declared not in supported:
            raise ValueError(f"{encoding} is not supported by dataframe_to_mds")
        mapped = _mapped_encoding(data_type)
        if declared != mapped:
            raise ValueError(
                f"Mismatched types: column name `{name}` is `{mapped}` in DataFrame but `{declared}` "
                f"in user_defined_cols"
            )
    return None


def dataframe_to_mds(
    dataframe: Any,
    merge_index: bool = True,
    mds_kwargs: dict[str, Any] | None = None,
    udf_iterable: Callable[..., Any] | None = None,
    udf_kwargs: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """Convert a DataFrame to MDS, MosaicML Streaming style; returns ``(local, remote)`` (``remote`` is ``''``
    for a local ``out``).

    Args:
        dataframe: the DataFrame (classic or Spark Connect).
        merge_index: write the merged ``out/index.json``; if False, upstream's layout: one sub-directory per
            partition below ``out``, each with its own ``index.json``.
        mds_kwargs: ``out`` (required), ``columns``, ``compression`` (default ``'zstd'``), ``hashes``,
            ``size_limit``, ``keep_local``, ``exist_ok``, ``progress_bar``.
        udf_iterable: optional ``f(pandas_df, **udf_kwargs)`` yielding sample dicts; needs ``columns``.
        udf_kwargs: keyword arguments for ``udf_iterable``.
    """
    if dataframe is None or dataframe.isEmpty():
        raise ValueError("Input dataframe is None or Empty!")
    kwargs = dict(mds_kwargs or {})
    if "out" not in kwargs:
        raise ValueError("`out` and `columns` need to be specified in `mds_kwargs`")
    columns = kwargs.get("columns")
    if udf_iterable is not None:
        if columns is None:
            raise ValueError("If udf_iterable is specified, user must provide correct `columns` in the mds_kwargs")
        logger.warning("With udf_iterable defined, it's up to the user's discretion to provide mds_kwargs[columns]")
    elif columns is None:
        columns = infer_dataframe_schema(dataframe)
        logger.warning("columns was not given in mds_kwargs; inferred %s", columns)
    else:
        infer_dataframe_schema(dataframe, columns)
    local, remote = parse_out(kwargs["out"])
    if local is None:
        local = make_scratch("mds-spark-")  # lives while this process does (upstream returns its path)
    spark_dataframe_to_mds(
        dataframe,
        remote or local,
        columns=columns,
        compression=kwargs.get("compression", "zstd"),
        hashes=kwargs.get("hashes") or (),
        size_limit=kwargs.get("size_limit", 1 << 26),
        mode="overwrite" if kwargs.get("exist_ok") else "error",
        progress=bool(kwargs.get("progress_bar")),
        merge_index=merge_index,
        partition_folders=True,
        udf=udf_iterable,
        udf_kwargs=udf_kwargs,
    )
    if remote and merge_index:
        text = DatasetRoot(remote).read_text(INDEX_BASENAME)
        os.makedirs(local, exist_ok=True)
        with open(os.path.join(local, INDEX_BASENAME), "w", encoding="utf-8") as file:
            file.write(text or "")
    return local, remote or ""


def dataframeToMDS(
    dataframe: Any,
    merge_index: bool = True,
    mds_kwargs: dict[str, Any] | None = None,
    udf_iterable: Callable[..., Any] | None = None,
    udf_kwargs: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """Deprecated name of :func:`dataframe_to_mds` (same arguments)."""
    logger.warning("dataframeToMDS is deprecated; use dataframe_to_mds with the same arguments.")
    return dataframe_to_mds(dataframe, merge_index, mds_kwargs, udf_iterable, udf_kwargs)
