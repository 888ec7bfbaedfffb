"""Upstream's import path for the Spark converter: `streaming.base.converters` (`streaming.compat.spark_converter`).

Importing it needs pyspark; without it the ImportError names the ``pip install`` of the ``spark`` extra.
"""

from streaming.compat.spark_converter import (
    SPARK_TO_MDS,
    dataframe_to_mds,
    dataframeToMDS,
    infer_dataframe_schema,
    is_json_compatible,
)

__all__ = ["dataframeToMDS", "dataframe_to_mds", "SPARK_TO_MDS", "infer_dataframe_schema", "is_json_compatible"]
