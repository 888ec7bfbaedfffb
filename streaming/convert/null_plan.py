"""Which columns of a conversion get a NULL mask or become ``json``, whatever engine counted their NULLs.

The rules (``nulls="mask"``, the default) for the columns whose default encoding has no NULL (``json`` keeps
NULL as ``null``) and that the input marks nullable:

* a column with NULL values gets a NULL-mask column (``streaming.format.mds.nulls``): NULL is written as the
  encoding's zero value and the mask says which rows were NULL; our readers give ``None`` back;
* an ``ndarray`` column whose arrays hold NULL elements (a mask per row cannot say which element) is
  written as ``json``, which keeps them as ``null``;
* an ``ndarray`` column of arrays of arrays with a row that is not rectangular (an ndarray has one shape) is
  written as ``json`` too, with either policy: that is a type rule, found in the same pass;
* columns the user gave an encoding for (``columns={...}``) are left as they are, as is everything with
  ``nulls="error"``: a NULL there stops the conversion naming the column and row.

NULL counts come from the Delta table's per-file statistics (``nullCount``) when the input is a Delta table
and every file has them; the engine counts whatever is left in one pass before the write (Spark: one
aggregate job, `streaming.spark.nulls`; the pyarrow engine: one read, `streaming.convert.arrow_engine`).

A column without NULLs keeps its encoding and bytes, so converting NULL-free data is unchanged. Rows joining
an existing dataset (``mode="append"``) keep its columns: a column the dataset masks (or stores as ``json`` for
NULL elements) is written that way whether or not the new rows hold NULLs, and NULLs in a column the dataset
stores without a mask are refused, naming it, before anything is written (its shards must share their columns).

``nulls="nullable"`` (what ``incremental_to_mds`` writes with, so that no later NULL can stop it) decides from
the input's schema instead of its data: every nullable column gets a NULL mask whether or not it holds NULLs
(nothing is counted), and only arrays whose elements may be NULL are counted (``json`` when some are). Rows
joining a dataset may *widen* it: a column its shards store without a mask gets one, and an ``ndarray`` column
whose new arrays hold NULL elements is written as ``json``, in the new shards only (`widens` says which
differences are such widenings; readers decode each shard by its own columns). Imports pyarrow only, no pyspark.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming.convert.source import Source
from streaming.format.mds.nulls import MASK_ENCODING, mask_name, masked_columns

NULL_POLICIES = ("mask", "error", "nullable")
#: The policy under which rows joining a dataset may widen its columns (masks added, ndarray to json).
WIDENING_POLICY = "nullable"
DELTA_STATISTICS = "delta statistics"
AGGREGATE = "aggregate"

#: ``count(values, elements, nested)`` → (NULL count of each of ``values``, rows with a NULL element (at any depth)
#: of each of ``elements``, rows that are not rectangular of each of ``nested``).
NullCounter = Callable[[list[str], list[str], list[str]], tuple[dict[str, int], dict[str, int], dict[str, int]]]


@dataclass(frozen=True)
class NullPlan:
    """The columns to write once NULLs are accounted for.

    Attributes:
        columns: column name → encoding, mask columns included.
        masks: value column → its NULL-mask column.
        as_json: ``ndarray`` columns written as ``json`` because their arrays hold NULL elements.
        ragged: ``ndarray`` columns written as ``json`` because some row's arrays of arrays are not rectangular.
        counted_by: where the NULL counts came from (``"delta statistics"``, ``"aggregate"``, both joined
            by ``+``), or None when nothing needed counting.
    """

    columns: dict[str, str]
    masks: dict[str, str] = field(default_factory=dict)
    as_json: list[str] = field(default_factory=list)
    counted_by: str | None = None
    ragged: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"masks": self.masks, "as_json": self.as_json, "ragged": self.ragged, "counted_by": self.counted_by}


def check_policy(policy: str) -> None:
    """Refuse an unknown ``nulls`` value."""
    if policy not in NULL_POLICIES:
        raise ValueError(f"nulls must be one of {', '.join(map(repr, NULL_POLICIES))}, got {policy!r}.")


def dataset_columns(shards: list[dict[str, Any]]) -> dict[str, str] | None:
    """``{name: encoding}`` that new rows must keep: the columns of a dataset's MDS shards at their widest (a mask
    any shard has, ``json`` where any shard widened an ``ndarray``), or None without MDS shards."""
    widest: dict[str, str] | None = None
    for shard in shards:
        if shard.get("format") != "mds":
            continue
        columns = dict(zip(shard.get("column_names", []), shard.get("column_encodings", [])))
        if widest is None:
            widest = columns
            continue
        for name, encoding in columns.items():
            if name not in widest or (encoding == "json" and widest[name].startswith("ndarray")):
                widest[name] = encoding
    return widest


def widens(old: Mapping[str, str], new: Mapping[str, str]) -> bool:
    """Whether shards with columns ``new`` may join shards with columns ``old`` under the widening policy: the
    same value columns, each with the same encoding or ``json`` in place of an ``ndarray``, and every mask of
    ``old`` kept (``new`` may add masks)."""
    old_masks, new_masks = masked_columns(list(old), list(old.values())), masked_columns(list(new), list(new.values()))
    old_values = {name: encoding for name, encoding in old.items() if name not in set(old_masks.values())}
    new_values = {name: encoding for name, encoding in new.items() if name not in set(new_masks.values())}
    if set(old_values) != set(new_values):
        return False
    if any(new_values[name] != "json" and new_masks.get(name) != mask for name, mask in old_masks.items()):
        return False  # a mask is dropped only where the column became json, which holds null itself
    return all(
        new_values[name] == encoding or (new_values[name] == "json" and encoding.startswith("ndarray"))
        for name, encoding in old_values.items()
    )


def null_columns(
    columns: Mapping[str, str],
    *,
    explicit: Collection[str],
    policy: str,
    nullable: Collection[str],
    null_elements: Collection[str],
    source: Source,
    count: NullCounter,
    dataset: Mapping[str, str] | None = None,
    caller: str = "dataframe_to_mds",
    nested: Collection[str] = (),
) -> NullPlan:
    """Count the NULLs of the columns that need it and return the columns to write (see the module docstring).

    Args:
        columns: the resolved ``{name: encoding}`` without NULL handling.
        explicit: the columns the user chose an encoding for.
        policy: ``"mask"``, ``"error"`` or ``"nullable"``.
        nullable: the columns the input marks nullable.
        null_elements: the array columns whose elements the input marks nullable.
        source: where the rows come from (its Delta statistics are used when it is a Delta table).
        count: the engine's one pass over the rows for the counts the statistics do not give.
        dataset: the columns of the dataset these rows join, or None for a new dataset.
        caller: the function named in the warning.
        nested: the columns of arrays of arrays (whose rows must be rectangular for an ``ndarray``).
    """
    check_policy(policy)
    plan = dict(columns)
    chosen = [name for name in plan if name not in explicit]
    joined = dict(dataset or {})
    arrays = [name for name in chosen if plan[name].startswith("ndarray")]
    kept_json = [name for name in arrays if joined.get(name) == "json"]
    shaped = [name for name in arrays if name in nested and name not in kept_json]
    if policy == "error":
        ragged = _ragged(shaped, joined, count([], [], shaped)[2] if shaped else {})
        for name in ragged + [name for name in kept_json if name in nested]:
            plan[name] = "json"
        _warn(caller, {}, [], {}, ragged)
        return NullPlan(plan, ragged=ragged)
    kept_masks = {
        name: mask for name, mask in masked_columns(list(joined), list(joined.values())).items() if name in chosen
    }
    values = [
        name
        for name in chosen
        if plan[name] != "json" and name in nullable and name not in kept_masks and name not in kept_json
    ]
    elements = [name for name in arrays if name in null_elements and name not in kept_json]
    counts: dict[str, int] = {}
    element_counts: dict[str, int] = {}
    ragged_rows: dict[str, int] = {}
    sources = []
    widening = policy == WIDENING_POLICY
    counted = [] if widening else values  # the widening policy masks from the schema alone: nothing to count
    if counted or elements or shaped:
        counts = _delta_null_counts(source, counted)
        sources = [DELTA_STATISTICS] if counts else []
        unknown = [name for name in counted if name not in counts]
        if unknown or elements or shaped:
            # One pass: NULLs, NULL elements and rows that are not rectangular together.
            found, element_counts, ragged_rows = count(unknown, elements, shaped)
            counts.update(found)
            if unknown or elements:
                sources.append(AGGREGATE)
    ragged = _ragged(shaped, joined, ragged_rows)
    as_json = [name for name in elements if element_counts[name] and name not in ragged]
    masks = {name: mask for name, mask in kept_masks.items() if name not in as_json + kept_json}
    left_out = as_json + kept_json + ragged
    if widening:
        new_masks = {name: _free_mask_name(name, plan) for name in values if name not in left_out}
        _warn_widening(caller, dataset, new_masks, as_json)
    else:
        new_masks = {name: _free_mask_name(name, plan) for name in values if counts[name] and name not in left_out}
        if dataset is not None:
            _check_dataset_keeps_columns(dataset, new_masks, as_json, counts, element_counts)
    masks.update(new_masks)
    for name in left_out:
        plan[name] = "json"
    for mask in masks.values():
        plan[mask] = MASK_ENCODING
    if widening:
        _warn(caller, {}, [], {}, ragged)
    else:
        _warn(caller, new_masks, as_json, counts, ragged)
    return NullPlan(plan, masks, as_json + kept_json, "+".join(sources) or None, ragged)


def _ragged(shaped: list[str], joined: Mapping[str, str], ragged_rows: Mapping[str, int]) -> list[str]:
    """The columns of arrays of arrays with rows that are not rectangular; refused when they join a dataset that
    stores them as ``ndarray`` (its shards share their columns)."""
    found = [name for name in shaped if ragged_rows.get(name)]
    refused = [f"{name!r} ({ragged_rows[name]} rows)" for name in found if name in joined]
    if refused:
        raise ValueError(
            f"The rows to append hold arrays of arrays that are not rectangular in column(s) {', '.join(refused)}, "
            f"which the dataset's shards store as ndarray, and all shards of a dataset share their columns. Choices: "
            f"convert all rows again into a new dataset (such columns are then stored as json), or make them "
            f"rectangular first."
        )
    return found


def _check_dataset_keeps_columns(
    dataset: Mapping[str, str],
    new_masks: Mapping[str, str],
    as_json: list[str],
    counts: Mapping[str, int],
    element_counts: Mapping[str, int],
) -> None:
    found = [f"{name!r} ({counts[name]} NULLs)" for name in new_masks if name in dataset]
    found += [f"{name!r} ({element_counts[name]} arrays with NULL elements)" for name in as_json if name in dataset]
    if found:
        raise ValueError(
            f"The rows to append hold NULLs in column(s) {', '.join(found)}, which the dataset's shards store "
            f"without NULLs (its earlier rows had none), and all shards of a dataset share their columns. "
            f"Choices: convert all rows again into a new dataset (the NULL-holding columns then get NULL masks), "
            f"fill the NULLs first, or nulls='error' to stop at the first NULL."
        )


def _free_mask_name(name: str, plan: Mapping[str, str]) -> str:
    mask = mask_name(name)
    if mask in plan:
        raise ValueError(
            f"Column {name!r} holds NULLs, and its NULL-mask column {mask!r} would clash with the input's "
            f"column of that name. Choices: rename that column, give {name!r} an encoding with `columns` (e.g. "
            f"'json'), or nulls='error' after filling the NULLs."
        )
    return mask


def _warn_widening(
    caller: str, dataset: Mapping[str, str] | None, masks: Mapping[str, str], as_json: list[str]
) -> None:
    """Say when rows joining a dataset widen its columns (the new shards' columns differ from the older ones')."""
    if not dataset:
        return
    added = [name for name in masks if name in dataset]
    widened = [name for name in as_json if name in dataset and dataset[name] != "json"]
    if added or widened:
        parts = [f"NULL masks for {added}"] if added else []
        parts += [f"'json' for the arrays with NULL elements of {widened}"] if widened else []
        warnings.warn(
            f"{caller}: the new rows are stored with {' and '.join(parts)}, which the dataset's earlier shards lack; "
            f"each shard is read by its own columns (streaming gives None for a masked NULL).",
            UserWarning,
            stacklevel=5,
        )


def _warn(
    caller: str, masks: Mapping[str, str], as_json: list[str], counts: Mapping[str, int], ragged: Sequence[str] = ()
) -> None:
    parts = []
    if ragged:
        parts.append(
            f"columns {list(ragged)} hold arrays of arrays that are not rectangular in some rows, which an ndarray "
            f"cannot hold, and are written as 'json'"
        )
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
        advice = "Pass `columns` to choose the encodings."
        if masks or as_json:
            advice = (
                "Pass nulls='error' (--nulls error on the command line) to refuse NULLs instead, or `columns` to "
                "choose the encodings."
            )
        warnings.warn(f"{caller}: " + "; ".join(parts) + ". " + advice, UserWarning, stacklevel=5)


def _delta_null_counts(source: Source, names: list[str]) -> dict[str, int]:
    """Top-level NULL counts from the Delta log's per-file statistics, for the columns every file has them for
    (from the snapshot the conversion reads, `streaming.delta.snapshot.Snapshot.null_counts`)."""
    if source.kind != "delta" or not source.name or not names:
        return {}
    try:
        from streaming.convert.arrow_inputs import delta_snapshot

        return delta_snapshot(source.name, source.version).null_counts(names)
    except Exception:  # noqa: BLE001 - no deltalake, a table name or a path it cannot open: the engine counts
        return {}
