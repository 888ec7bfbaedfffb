"""Upstream path `streaming.base.converters.dataframe_to_mds`: re-exports of `streaming.compat.spark_converter`."""

from streaming.base.converters import (
    SPARK_TO_MDS,
    dataframe_to_mds,
    dataframeToMDS,
    infer_dataframe_schema,
    is_json_compatible,
)

__all__ = ["dataframeToMDS", "dataframe_to_mds", "SPARK_TO_MDS", "infer_dataframe_schema", "is_json_compatible"]
