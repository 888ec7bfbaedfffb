"""The Spark engine's part of NULL handling: which columns may hold NULLs, and their counts in one job.

The rules and the Delta statistics are `streaming.convert.null_plan`'s; this module gives it the DataFrame's
nullable columns and, for the counts the statistics do not give, one aggregate job (``count(*) - count(col)``
for all of them at once).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from pyspark.sql import types as T

from streaming.spark.schema import array_depth, quote_name


def nullable_columns(frame: Any, columns: Collection[str]) -> tuple[list[str], list[str]]:
    """Of ``columns``: those the DataFrame marks nullable, and the array columns whose elements (at any depth) are
    nullable."""
    fields = {item.name: item for item in frame.schema.fields}
    nullable = [name for name in columns if name in fields and fields[name].nullable]
    elements = [name for name in columns if name in fields and _elements_nullable(fields[name].dataType)]
    return nullable, elements


def _elements_nullable(data_type: T.DataType) -> bool:
    while isinstance(data_type, T.ArrayType):
        if data_type.containsNull:
            return True
        data_type = data_type.elementType
    return False


def _null_inside(expression: str, depth: int, level: int = 0) -> str:
    """SQL: whether the array ``expression``, nested ``depth`` deep, holds a NULL array or element below its top."""
    item = f"x{level}"
    inner = f"{item} IS NULL"
    if depth > 1:
        inner += f" OR {_null_inside(item, depth - 1, level + 1)}"
    return f"exists({expression}, {item} -> {inner})"


def _not_rectangular(expression: str, depth: int) -> str:
    """SQL: whether some level of the array ``expression``, nested ``depth`` deep, has lists of differing lengths."""
    checks = []
    for axis in range(1, depth):
        # The lengths of all lists at depth axis + 1, gathered from the lists above them.
        names = [f"y{level}" for level in range(axis)]
        sizes = f"size({names[-1]})"
        for level in range(axis - 1, -1, -1):
            source = expression if level == 0 else names[level - 1]
            sizes = f"transform({source}, {names[level]} -> {sizes})"
            if level < axis - 1:
                sizes = f"flatten({sizes})"
        checks.append(f"size(array_distinct({sizes})) > 1")
    return " OR ".join(checks) or "false"


def aggregate_null_counts(
    frame: Any, values: list[str], elements: list[str], nested: Sequence[str] = ()
) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """One Spark job: the NULL count of each of ``values``, the rows with a NULL element (at any depth) of each of
    ``elements`` and the rows that are not rectangular of each of ``nested`` (arrays of arrays)."""
    fields = {item.name: item.dataType for item in frame.schema.fields}
    # SQL text rather than Column objects: the same code then runs on classic sessions and Spark Connect.
    expressions = [f"count(1) - count({quote_name(name)}) AS v{i}" for i, name in enumerate(values)]
    expressions += [
        f"count_if({_null_inside(quote_name(name), max(1, array_depth(fields[name])))}) AS e{i}"
        for i, name in enumerate(elements)
    ]
    expressions += [
        f"count_if({_not_rectangular(quote_name(name), array_depth(fields[name]))}) AS r{i}"
        for i, name in enumerate(nested)
    ]
    if not expressions:
        return {}, {}, {}
    row = frame.selectExpr(*expressions).collect()[0]
    return (
        {name: int(row[f"v{i}"] or 0) for i, name in enumerate(values)},
        {name: int(row[f"e{i}"] or 0) for i, name in enumerate(elements)},
        {name: int(row[f"r{i}"] or 0) for i, name in enumerate(nested)},
    )
