"""Spark: convert DataFrames and Delta tables to MDS shards with a commit protocol.

``dataframe_to_mds(df_or_table, out, ...)`` writes each partition with ``mapInArrow`` into its own attempt
folder under ``out`` and publishes ``out/index.json`` (MDS index version 2, basenames relative to ``out``)
once Spark reports every partition done, so MosaicML Streaming and this package read the result as is.
Type rules (every Spark type, NULLs included) are in :mod:`streaming.spark.schema`.

Layout of a dataset written here::

    out/index.json                                   the merged index, written last
    out/mds_conversion.json                          source (table version), columns, counts per run
    out/<run>/part-<partition>-attempt-<id>/index.json   the attempt's own index (written last by the task)
    out/<run>/part-<partition>-attempt-<id>/shard.NNNNN.mds[.zstd]
"""

from __future__ import annotations

from streaming.spark._requires import require_pyspark

require_pyspark()

# The imports below need pyspark: they come after the check that names the extra to install.
from streaming.spark.convert import ConversionResult, dataframe_to_mds  # noqa: E402 - after require_pyspark()
from streaming.spark.incremental import IncrementResult, incremental_to_mds  # noqa: E402 - after require_pyspark()
from streaming.spark.schema import allowed_encodings, default_encoding, resolve_columns  # noqa: E402 - see above

__all__ = [
    "ConversionResult",
    "dataframe_to_mds",
    "IncrementResult",
    "incremental_to_mds",
    "allowed_encodings",
    "default_encoding",
    "resolve_columns",
]
