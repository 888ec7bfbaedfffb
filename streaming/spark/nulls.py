"""Which columns of a conversion hold NULLs, and the columns written for them (``nulls="mask"``, the default).

Only columns whose default encoding has no NULL are looked at (``json`` keeps NULL as ``null``), and only
those Spark marks nullable. Their NULL counts come from the Delta table's per-file statistics
(``nullCount``) when the input is a Delta table and every file has them; whatever is left is counted in one
aggregate job before the write (``count(*) - count(col)`` for all of them at once). Then:

* a column with NULL values gets a NULL-mask column (``streaming.format.mds.nulls``): NULL is written as the
  encoding's zero value and the mask says which rows were NULL; our readers give ``None`` back;
* an ``ndarray`` column whose arrays hold NULL elements (a mask per row cannot say which element) is
  written as ``json``, which keeps them as ``null``;
* columns the user gave an encoding for (``columns={...}``) are left as they are, as is everything with
  ``nulls="error"``: a NULL there stops the conversion naming the column and row.

A column without NULLs keeps its encoding and bytes, so converting NULL-free data is unchanged.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from streaming.format.mds.nulls import MASK_ENCODING, mask_name
from streaming.spark.schema import quote_name
from streaming.spark.source import Source

NULL_POLICIES = ("mask", "error")
DELTA_STATISTICS = "delta statistics"
AGGREGATE = "aggregate"


@dataclass(frozen=True)
class NullPlan:
    """The columns to write once NULLs are accounted for.

    Attributes:
        columns: column name → encoding, mask columns included.
        masks: value column → its NULL-mask column.
        as_json: ``ndarray`` columns written as ``json`` because their arrays hold NULL elements.
        counted_by: where the NULL counts came from (``"delta statistics"``, ``"aggregate"``, both joined
            by ``+``), or None when nothing needed counting.
    """

    columns: dict[str, str]
    masks: dict[str, str] = field(default_factory=dict)
    as_json: list[str] = field(default_factory=list)
    counted_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"masks": self.masks, "as_json": self.as_json, "counted_by": self.counted_by}


def plan_nulls(
    frame: Any, source: Source, columns: Mapping[str, str], explicit: Collection[str], policy: str
) -> NullPlan:
    """Count the NULLs of the columns that need it and return the columns to write (see the module docstring)."""
    if policy not in NULL_POLICIES:
        raise ValueError(f"nulls must be one of {', '.join(map(repr, NULL_POLICIES))}, got {policy!r}.")
    plan = dict(columns)
    if policy == "error":
        return NullPlan(plan)
    fields = {item.name: item for item in frame.schema.fields}
    values = [name for name in plan if name not in explicit and plan[name] != "json" and fields[name].nullable]
    elements = [
        name
        for name in plan
        if name not in explicit
        and plan[name].startswith("ndarray")
        and isinstance(fields[name].dataType, T.ArrayType)
        and fields[name].dataType.containsNull
    ]
    if not values and not elements:
        return NullPlan(plan)
    counts = _delta_null_counts(source, values)
    sources = [DELTA_STATISTICS] if counts else []
    unknown = [name for name in values if name not in counts]
    if unknown or elements:
        counted, element_counts = _aggregate_null_counts(frame, unknown, elements)
        counts.update(counted)
        sources.append(AGGREGATE)
    else:
        element_counts = {}
    as_json = [name for name in elements if element_counts[name]]
    for name in as_json:
        plan[name] = "json"
    masks = {}
    for name in values:
        if counts[name] and name not in as_json:
            masks[name] = _free_mask_name(name, fields, plan)
            plan[masks[name]] = MASK_ENCODING
    _warn(masks, as_json, counts)
    return NullPlan(plan, masks, as_json, "+".join(sources))


def _free_mask_name(name: str, fields: Mapping[str, Any], plan: Mapping[str, str]) -> str:
    mask = mask_name(name)
    if mask in fields or mask in plan:
        raise ValueError(
            f"Column {name!r} holds NULLs, and its NULL-mask column {mask!r} would clash with the DataFrame's "
            f"column of that name. Choices: rename that column, give {name!r} an encoding with `columns` (e.g. "
            f"'json'), or nulls='error' after filling the NULLs."
        )
    return mask


def _warn(masks: Mapping[str, str], as_json: list[str], counts: Mapping[str, int]) -> None:
    parts = []
    if masks:
        listed = ", ".join(
            f"{name!r} ({counts[name]} NULL{'s' if counts[name] != 1 else ''}, mask {mask!r})"
            for name, mask in masks.items()
        )
        parts.append(
            f"column(s) {listed} hold NULLs: each is written with a uint8 NULL-mask column (1 = NULL) and the "
            f"encoding's zero value in place of NULL; streaming reads them back as None, MosaicML Streaming "
            f"sees both columns"
        )
    if as_json:
        parts.append(f"array columns {as_json} hold NULL elements and are written as 'json' (NULL as null)")
    if parts:
        warnings.warn(
            "dataframe_to_mds: " + "; ".join(parts) + ". Pass nulls='error' to refuse NULLs instead, or `columns` "
            "to choose the encodings.",
            UserWarning,
            stacklevel=3,
        )


def _delta_null_counts(source: Source, names: list[str]) -> dict[str, int]:
    """Top-level NULL counts from the Delta log's per-file statistics, for the columns every file has them for."""
    if source.kind != "delta" or not source.name or not names:
        return {}
    try:
        from deltalake import DeltaTable

        actions = pa.table(DeltaTable(source.name, version=source.version).get_add_actions(flatten=False))
        if actions.num_rows == 0:
            return dict.fromkeys(names, 0)
        stats = actions.column("null_count").combine_chunks()
    except Exception:  # noqa: BLE001 - no deltalake, a path it cannot open, no statistics: count with Spark
        return {}
    counts = {}
    for name in names:
        try:
            column = stats.field(name)
        except KeyError:
            continue
        # A struct's count is per field in Delta's statistics, and a file without statistics has none.
        if pa.types.is_integer(column.type) and column.null_count == 0:
            counts[name] = int(pc.sum(column).as_py() or 0)
    return counts


def _aggregate_null_counts(frame: Any, values: list[str], elements: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """One Spark job: the NULL count of each of ``values`` and the rows with a NULL element of each of ``elements``."""
    # SQL text rather than Column objects: the same code then runs on classic sessions and Spark Connect.
    expressions = [f"count(1) - count({quote_name(name)}) AS v{i}" for i, name in enumerate(values)]
    expressions += [f"count_if(exists({quote_name(name)}, x -> x IS NULL)) AS e{i}" for i, name in enumerate(elements)]
    row = frame.selectExpr(*expressions).collect()[0]
    return (
        {name: int(row[f"v{i}"] or 0) for i, name in enumerate(values)},
        {name: int(row[f"e{i}"] or 0) for i, name in enumerate(elements)},
    )
