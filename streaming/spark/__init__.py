"""Spark: convert DataFrames and Delta tables to MDS shards with a commit protocol.

``dataframe_to_mds(df_or_table, out, ...)`` writes each partition with ``mapInArrow`` into its own attempt
folder under ``out`` and publishes ``out/index.json`` (MDS index version 2, basenames relative to ``out``)
once Spark reports every partition done, so MosaicML Streaming and this package read the result as is.
This package holds only what needs pyspark (reading the input, the Spark face of the type rules, the job and
its NULL counts, Spark's reader of a Delta table for the scheduled job of `streaming.incremental`); the
conversion itself is `streaming.convert`'s, shared with the command line's pyarrow engine. Type rules (every
Spark type, NULLs included): `streaming.convert.type_rules`.

Layout of a dataset written here::

    out/index.json                                   the merged index, written last
    out/mds_conversion.json                          source (table version), columns, counts per run
    out/<run>/part-<partition>-attempt-<id>/index.json   the attempt's own index (written last by the task)
    out/<run>/part-<partition>-attempt-<id>/shard.NNNNN.mds[.zstd]
"""

from __future__ import annotations

import importlib
from typing import Any

from streaming._extras import check_installed

# Resolved on first use: `import streaming.spark` alone checks nothing and imports no pyspark.
_EXPORTS = {
    "ConversionResult": "streaming.spark.convert",
    "dataframe_to_mds": "streaming.spark.convert",
    "IncrementResult": "streaming.incremental.result",
    "incremental_to_mds": "streaming.spark.incremental_job",
    "allowed_encodings": "streaming.spark.schema",
    "default_encoding": "streaming.spark.schema",
    "resolve_columns": "streaming.spark.schema",
    "ship_package": "streaming.spark.ship",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.spark' has no attribute {name!r}")
    check_installed(("pyspark", "pyarrow"), "spark", f"streaming.spark.{name}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
