"""The Spark engine's part of NULL handling: which columns may hold NULLs, and their counts in one job.

The rules and the Delta statistics are `streaming.convert.null_plan`'s; this module gives it the DataFrame's
nullable columns and, for the counts the statistics do not give, one aggregate job (``count(*) - count(col)``
for all of them at once).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pyspark.sql import types as T

from streaming.spark.schema import quote_name


def nullable_columns(frame: Any, columns: Collection[str]) -> tuple[list[str], list[str]]:
    """Of ``columns``: those the DataFrame marks nullable, and the array columns whose elements are nullable."""
    fields = {item.name: item for item in frame.schema.fields}
    nullable = [name for name in columns if name in fields and fields[name].nullable]
    elements = [
        name
        for name in columns
        if name in fields and isinstance(fields[name].dataType, T.ArrayType) and fields[name].dataType.containsNull
    ]
    return nullable, elements


def aggregate_null_counts(frame: Any, values: list[str], elements: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """One Spark job: the NULL count of each of ``values`` and the rows with a NULL element of each of ``elements``."""
    # SQL text rather than Column objects: the same code then runs on classic sessions and Spark Connect.
    expressions = [f"count(1) - count({quote_name(name)}) AS v{i}" for i, name in enumerate(values)]
    expressions += [f"count_if(exists({quote_name(name)}, x -> x IS NULL)) AS e{i}" for i, name in enumerate(elements)]
    row = frame.selectExpr(*expressions).collect()[0]
    return (
        {name: int(row[f"v{i}"] or 0) for i, name in enumerate(values)},
        {name: int(row[f"e{i}"] or 0) for i, name in enumerate(elements)},
    )
