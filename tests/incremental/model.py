"""The oracle's side of the incremental job: a Delta table's history kept in plain Python, and the stated semantics
replayed over it (module docstring of `streaming.incremental.job`), independent of the package's code.

`TableModel` holds every version's rows as Python values (what the test wrote into the real delta-rs table, never
what the package read back), the columns each version has, whether the Change Data Feed was on at it and what
kind of commit made it. `replay` computes the multiset a dataset must hold after a sequence of runs; `dataset_rows`
reads a dataset back through ``LocalDataset`` into the same normal form. Rows are compared as tuples of normal
values: floats by their IEEE bits (so -0.0 is not 0.0 and NaN equals NaN), timestamps as integer microseconds,
decimals as their digits at the column's scale, structs as sorted items, arrays as tuples.

`mirror` is the mirror mode's replay (issue 26): after a run to version ``v`` a mirror holds version ``v``'s rows.
"""

from __future__ import annotations

import datetime
import math
import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
DECIMAL_SCALE = Decimal("0.001")

#: Kinds of commit, as far as the semantics care.
DATA = "data"  # changes rows (dataChange=true actions)
MAINTENANCE = "maintenance"  # rearranges files or changes metadata only (dataChange=false, or no file action)
REPLACE = "replace"  # replaces the table by one of Delta's replace operations (REPLACE ..., RESTORE, CLONE)
SCHEMA = "schema"  # changes the schema without changing rows


@dataclass
class Version:
    """One table version as the test made it."""

    rows: list[dict[str, Any]]
    columns: tuple[str, ...]
    feed: bool
    kind: str
    operation: str


@dataclass
class TableModel:
    """Every version of one table, in plain Python."""

    versions: list[Version] = field(default_factory=list)
    vacuumed_after: int | None = None

    @property
    def version(self) -> int:
        return len(self.versions) - 1

    @property
    def current(self) -> Version:
        return self.versions[-1]

    def add(self, rows: Iterable[Mapping[str, Any]], kind: str, operation: str, **changes: Any) -> None:
        """Record the next version: ``rows`` (copied) and what else changed (``columns``, ``feed``)."""
        last = self.versions[-1] if self.versions else None
        self.versions.append(
            Version(
                rows=[dict(row) for row in rows],
                columns=tuple(changes.get("columns", last.columns if last else ())),
                feed=bool(changes.get("feed", last.feed if last else False)),
                kind=kind,
                operation=operation,
            )
        )

    def window(self, start: int, end: int) -> list[Version]:
        return self.versions[start + 1 : end + 1]

    def feed_gives(self, start: int, end: int) -> bool:
        """Whether the semantics let the job read versions ``start + 1 .. end`` from the Change Data Feed: on at
        every version, and nothing in between replaced the table or changed its schema."""
        window = self.window(start, end)
        return bool(window) and all(v.feed and v.kind not in (REPLACE, SCHEMA) for v in window)

    def only_maintenance(self, start: int, end: int) -> bool:
        return all(v.kind in (MAINTENANCE, SCHEMA) for v in self.window(start, end))


@dataclass(frozen=True)
class Run:
    """A run that committed: the version the dataset held before (None: its first run) and after."""

    previous: int | None
    version: int
    resync: bool = False


def replay(model: TableModel, runs: Sequence[Run], columns: Sequence[str]) -> Counter:
    """The multiset of rows (normal form, on ``columns``) a dataset holds after ``runs`` (in commit order)."""
    held: Counter = Counter()
    last: int | None = None
    for run in runs:
        assert run.previous == last, f"run {run} does not start where the previous run ended ({last})"
        new = Counter(row_key(row, columns) for row in model.versions[run.version].rows)
        if run.resync:
            held += new - held  # the rows of the new version the dataset does not already hold
        elif last is None:
            held = new
        else:
            held += new - Counter(row_key(row, columns) for row in model.versions[last].rows)
        last = run.version
    return held


def mirror(model: TableModel, runs: Sequence[Run], columns: Sequence[str]) -> Counter:
    """The multiset a mirror dataset holds after ``runs``: the rows of the version the last one reached."""
    if not runs:
        return Counter()
    return Counter(row_key(row, columns) for row in model.versions[runs[-1].version].rows)


def row_key(row: Mapping[str, Any], columns: Sequence[str]) -> tuple:
    """A model row in normal form, on ``columns`` (a column the row lacks is NULL, as Delta reads it)."""
    return tuple(normal(row.get(name)) for name in columns)


def normal(value: Any) -> Any:
    """One value (a model value or a value read back from a dataset) in the oracle's normal form."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return tuple(normal(item) for item in value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else struct.pack("<d", value)
    if isinstance(value, datetime.datetime):
        return (value - EPOCH) // datetime.timedelta(microseconds=1)
    if isinstance(value, Decimal):
        return str(value.quantize(DECIMAL_SCALE))
    if isinstance(value, (list, tuple)):
        return tuple(normal(item) for item in value)
    if isinstance(value, dict):
        return tuple(sorted((key, normal(item)) for key, item in value.items()))
    return value


def dataset_rows(out: str, columns: Sequence[str]) -> Counter:
    """Every sample of the dataset at ``out`` in normal form, on ``columns`` (an empty Counter before its first
    commit)."""
    from streaming import LocalDataset

    try:
        dataset = LocalDataset(out)
    except FileNotFoundError:
        return Counter()
    return Counter(tuple(normal(sample[name]) for name in columns) for sample in dataset)
