"""Generated table histories: operations applied to a real delta-rs table and to its `TableModel` at once.

Each `Op` does one thing to the table (one or more commits) and records the same change in the model from the
values the test chose, never from what delta-rs reads back; `apply` then checks that delta-rs's snapshot equals the
model's, so the model is a trustworthy oracle. `histories()` is the hypothesis strategy of operation sequences:
appends, updates, deletes, merges, overwrites (new rows or the same rows again), OPTIMIZE (compaction and
Z-order), RESTORE, the feed switched on and off, a column added, VACUUM, and the Databricks commits delta-rs
cannot write (`tests.incremental.databricks_log`), with the job run between steps (``Run``, ``Race``).
"""

from __future__ import annotations

import datetime
import os
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from tests.incremental import databricks_log
from tests.incremental.model import DATA, MAINTENANCE, REPLACE, SCHEMA, TableModel, row_key

CDF = "delta.enableChangeDataFeed"
#: Whether failing histories print their rows (set MDS_ORACLE_ROWS=1 to see them; the shapes usually suffice).
SHOW_ROWS = os.environ.get("MDS_ORACLE_ROWS") == "1"
UTC = datetime.timezone.utc
BASE_COLUMNS = ("id", "grp", "val", "ts", "amount", "blob", "meta", "nums")
EXTRA = "extra"
SCHEMA_FIELDS = {
    "id": pa.int64(),
    "grp": pa.string(),
    "val": pa.float64(),
    "ts": pa.timestamp("us", tz="UTC"),
    "amount": pa.decimal128(12, 3),
    "blob": pa.binary(),
    "meta": pa.struct([("k", pa.string()), ("n", pa.int32())]),
    "nums": pa.list_(pa.int32()),
    EXTRA: pa.int32(),
}


def arrow_rows(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> pa.Table:
    """Model rows as an Arrow table with the oracle table's types (``columns`` in order)."""
    schema = pa.schema([(name, SCHEMA_FIELDS[name]) for name in columns])
    return pa.Table.from_pylist([{name: row.get(name) for name in columns} for row in rows], schema=schema)


# -- values: the precision cases (microseconds, NaN, -0.0, decimals, binary, nested, NULL) -------------------
floats = st.one_of(
    st.sampled_from([0.0, -0.0, float("nan"), float("inf"), 1.5]),
    st.floats(allow_nan=False, width=64),
    st.none(),
)
timestamps = st.one_of(
    st.integers(0, 4_000_000_000_000_000).map(
        lambda us: datetime.datetime(1970, 1, 1, tzinfo=UTC) + datetime.timedelta(microseconds=us)
    ),
    st.none(),
)
decimals = st.one_of(st.integers(-(10**11), 10**11).map(lambda n: Decimal(n).scaleb(-3)), st.none())
rows_strategy_fields = {
    "grp": st.one_of(st.sampled_from(["a", "b", ""]), st.text(max_size=4), st.none()),
    "val": floats,
    "ts": timestamps,
    "amount": decimals,
    "blob": st.one_of(st.binary(max_size=6), st.none()),
    "meta": st.one_of(
        st.fixed_dictionaries({"k": st.one_of(st.text(max_size=3), st.none()), "n": st.integers(-5, 5)}), st.none()
    ),
    "nums": st.one_of(st.lists(st.one_of(st.integers(-(2**31), 2**31 - 1), st.none()), max_size=3), st.none()),
    EXTRA: st.one_of(st.integers(-100, 100), st.none()),
}


IDS = st.integers(0, 30)


@st.composite
def new_rows(draw: Any, ids: st.SearchStrategy[int] = IDS, size: int = 4) -> list[dict[str, Any]]:
    """A few rows with every column (``extra`` is dropped where the table does not have it yet)."""
    count = draw(st.integers(1, size))
    return [
        {"id": draw(ids), **{name: draw(strategy) for name, strategy in rows_strategy_fields.items()}}
        for _ in range(count)
    ]


# -- operations ----------------------------------------------------------------------------------------------
class Op:
    """One step of a history."""

    def apply(self, path: Path, model: TableModel) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        shown = [f"{key}={value!r}" for key, value in vars(self).items() if key != "rows"]
        if hasattr(self, "rows"):
            shown.append(f"rows={self.rows!r}" if SHOW_ROWS else f"{len(self.rows)} rows")
        return f"{type(self).__name__}({', '.join(shown)})"


def _project(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{name: row.get(name) for name in columns} for row in rows]


def _delta_version(path: Path) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).version()


def _record(
    path: Path, model: TableModel, rows: list[dict[str, Any]], kind: str, operation: str, **changes: Any
) -> None:
    """Add the versions delta-rs just made (the last one holds ``rows``; any before it rearranged only)."""
    made = _delta_version(path) - model.version
    if made == 0:  # delta-rs commits nothing when a predicate matches no row
        assert Counter(row_key(r, model.current.columns) for r in rows) == Counter(
            row_key(r, model.current.columns) for r in model.current.rows
        ), f"{operation} changed rows without a commit"
        return
    for _ in range(made - 1):
        model.add(model.current.rows, MAINTENANCE, operation)
    model.add(rows, kind, operation, **changes)


@dataclass(repr=False)
class Create(Op):
    rows: list[dict[str, Any]]
    feed: bool
    configuration: dict[str, str] | None = None  # more table properties (`long_histories`)

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import write_deltalake

        rows = _project(self.rows, BASE_COLUMNS)
        configuration = {**(self.configuration or {}), CDF: str(self.feed).lower()}
        write_deltalake(str(path), arrow_rows(rows, BASE_COLUMNS), configuration=configuration)
        model.add(rows, DATA, "CREATE", columns=BASE_COLUMNS, feed=self.feed)


@dataclass(repr=False)
class Append(Op):
    rows: list[dict[str, Any]]

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import write_deltalake

        columns = model.current.columns
        rows = _project(self.rows, columns)
        write_deltalake(str(path), arrow_rows(rows, columns), mode="append")
        _record(path, model, model.current.rows + rows, DATA, "WRITE")


@dataclass(repr=False)
class Overwrite(Op):
    rows: list[dict[str, Any]]
    same_rows: bool  # rewrite exactly the rows the table has (appends nothing under the semantics)

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import write_deltalake

        columns = model.current.columns
        rows = model.current.rows if self.same_rows else _project(self.rows, columns)
        write_deltalake(str(path), arrow_rows(rows, columns), mode="overwrite")
        _record(path, model, rows, DATA, "WRITE (overwrite)")


@dataclass(repr=False)
class Update(Op):
    ids: list[int]
    grp: str

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        DeltaTable(str(path)).update(new_values={"grp": self.grp}, predicate=_in(self.ids))
        rows = [{**row, "grp": self.grp} if row["id"] in self.ids else row for row in model.current.rows]
        _record(path, model, rows, DATA, "UPDATE")


@dataclass(repr=False)
class Delete(Op):
    ids: list[int]

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        DeltaTable(str(path)).delete(_in(self.ids))
        _record(path, model, [row for row in model.current.rows if row["id"] not in self.ids], DATA, "DELETE")


@dataclass(repr=False)
class Merge(Op):
    rows: list[dict[str, Any]]  # unique ids: matched ones update every column, the others are inserted

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        columns = model.current.columns
        source = {row["id"]: {name: row.get(name) for name in columns} for row in self.rows}
        (
            DeltaTable(str(path))
            .merge(arrow_rows(list(source.values()), columns), "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        matched = {row["id"] for row in model.current.rows}
        rows = [dict(source[row["id"]]) if row["id"] in source else row for row in model.current.rows]
        rows += [row for key, row in source.items() if key not in matched]
        _record(path, model, rows, DATA, "MERGE")


@dataclass(repr=False)
class Optimize(Op):
    zorder: bool

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        optimizer = DeltaTable(str(path)).optimize
        before = model.version
        (optimizer.z_order(["id"]) if self.zorder else optimizer.compact())
        if _delta_version(path) > before:
            _record(path, model, model.current.rows, MAINTENANCE, "OPTIMIZE")


@dataclass(repr=False)
class Restore(Op):
    back: int  # how many versions back (the target is clamped to one with the same columns)
    databricks: bool  # a RESTORE commit written as Databricks writes it, rather than delta-rs's

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        same = [v for v in range(model.version) if model.versions[v].columns == model.current.columns]
        if not same:
            return
        target = same[max(0, len(same) - 1 - self.back)]
        if model.vacuumed_after is not None and target < model.vacuumed_after:
            return  # its files are gone: RESTORE itself would fail
        if self.databricks:
            databricks_log.restore(path, target)
        else:
            DeltaTable(str(path)).restore(target)
        old = model.versions[target]
        _record(path, model, old.rows, REPLACE, "RESTORE", feed=old.feed)


@dataclass(repr=False)
class SwitchFeed(Op):
    on: bool

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        DeltaTable(str(path)).alter.set_table_properties({CDF: str(self.on).lower()})
        _record(path, model, model.current.rows, MAINTENANCE, "SET TBLPROPERTIES", feed=self.on)


@dataclass(repr=False)
class AddColumn(Op):
    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable, Field

        if EXTRA in model.current.columns:
            return
        DeltaTable(str(path)).alter.add_columns(Field(EXTRA, "integer", nullable=True))
        columns = (*model.current.columns, EXTRA)
        _record(
            path, model, [{**row, EXTRA: None} for row in model.current.rows], SCHEMA, "ADD COLUMNS", columns=columns
        )


@dataclass(repr=False)
class Vacuum(Op):
    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        before = model.version
        DeltaTable(str(path)).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
        if _delta_version(path) > before:
            _record(path, model, model.current.rows, MAINTENANCE, "VACUUM")
        model.vacuumed_after = model.version


@dataclass(repr=False)
class CleanupLog(Op):
    """Delta's log cleanup (delta-rs's ``cleanup_metadata``): with ``delta.logRetentionDuration`` 0, every log file
    before the newest checkpoint goes; a run holding a version before it then needs ``resync``, as after VACUUM."""

    def apply(self, path: Path, model: TableModel) -> None:
        from deltalake import DeltaTable

        log = path / "_delta_log"
        before = {item.name for item in log.iterdir()}
        DeltaTable(str(path)).cleanup_metadata()
        if {item.name for item in log.iterdir()} != before:
            model.vacuumed_after = max(model.vacuumed_after or 0, model.version)


@dataclass(repr=False)
class ReplaceAsSelect(Op):
    rows: list[dict[str, Any]]
    feed: bool | None
    same_rows: bool

    def apply(self, path: Path, model: TableModel) -> None:
        columns = model.current.columns
        rows = model.current.rows if self.same_rows else _project(self.rows, columns)
        databricks_log.create_or_replace_as_select(path, arrow_rows(rows, columns), feed=self.feed)
        feed = model.current.feed if self.feed is None else self.feed
        _record(path, model, rows, REPLACE, "CREATE OR REPLACE TABLE AS SELECT", feed=feed)


@dataclass(repr=False)
class PredictiveOptimization(Op):
    def apply(self, path: Path, model: TableModel) -> None:
        databricks_log.predictive_optimization(path)
        _record(path, model, model.current.rows, MAINTENANCE, "OPTIMIZE (predictive)")


@dataclass(repr=False)
class VacuumMarkers(Op):
    def apply(self, path: Path, model: TableModel) -> None:
        databricks_log.vacuum_markers(path)
        _record(path, model, model.current.rows, MAINTENANCE, "VACUUM START/END")


@dataclass(repr=False)
class Run(Op):
    """Run the job on every dataset under test (not a table change)."""

    def apply(self, path: Path, model: TableModel) -> None:
        raise AssertionError("runs are carried out by the test")


@dataclass(repr=False)
class Race(Run):
    """Two runs of the job at once on the same dataset."""


@dataclass(repr=False)
class Crash(Run):
    """A run killed after it wrote its shards (rewritten and new) and its key map, before its commit."""


def _in(ids: list[int]) -> str:
    return f"id IN ({', '.join(str(i) for i in sorted(set(ids)))})"


def check_table(path: Path, model: TableModel) -> None:
    """The real table's newest snapshot holds exactly the model's rows (so the model can judge the job)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    assert table.version() == model.version, f"delta-rs is at version {table.version()}, the model at {model.version}"
    columns = model.current.columns
    assert tuple(pa.schema(table.schema().to_arrow()).names) == columns
    read = table.to_pyarrow_table().to_pylist()
    assert Counter(row_key(row, columns) for row in read) == Counter(
        row_key(row, columns) for row in model.current.rows
    )


ids = IDS
table_changes = st.one_of(
    new_rows().map(Append),
    st.builds(Overwrite, new_rows(), st.booleans()),
    st.builds(Update, st.lists(ids, min_size=1, max_size=4), st.sampled_from(["u", "v", ""])),
    st.builds(Delete, st.lists(ids, min_size=1, max_size=4)),
    new_rows(ids=st.integers(0, 40)).map(lambda rows: Merge(list({r["id"]: r for r in rows}.values()))),
    st.builds(Optimize, st.booleans()),
    st.builds(Restore, st.integers(0, 4), st.booleans()),
    st.builds(SwitchFeed, st.booleans()),
    st.just(AddColumn()),
    st.just(Vacuum()),
    st.builds(ReplaceAsSelect, new_rows(), st.one_of(st.none(), st.booleans()), st.booleans()),
    st.just(PredictiveOptimization()),
    st.just(VacuumMarkers()),
)


@st.composite
def histories(draw: Any, max_steps: int = 12) -> list[Op]:
    """A table's creation (feed on or off), then table changes with runs of the job between random steps."""
    steps: list[Op] = [Create(draw(new_rows(size=6)), draw(st.booleans()))]
    if draw(st.booleans()):
        steps.append(Run())  # the first run at the creation, or later
    for _ in range(draw(st.integers(2, max_steps))):
        steps.append(draw(table_changes))
        if draw(st.integers(0, 2)) == 0:
            steps.append(draw(st.sampled_from([Run(), Run(), Race()])))
    steps.append(Run())
    return steps


#: The table properties of `long_histories`: a checkpoint every 10 versions (delta-rs writes it at its commit), and
#: log cleanup only where the history asks for it (`CleanupLog`), then of every file before the newest checkpoint.
LONG_HISTORY_TABLE = {
    "delta.checkpointInterval": "10",
    "delta.logRetentionDuration": "interval 0 seconds",
    "delta.enableExpiredLogCleanup": "false",
}
long_changes = st.one_of(
    new_rows().map(Append),
    st.builds(Update, st.lists(ids, min_size=1, max_size=4), st.sampled_from(["u", "v", ""])),
    st.builds(Delete, st.lists(ids, min_size=1, max_size=4)),
    new_rows(ids=st.integers(0, 40)).map(lambda rows: Merge(list({r["id"]: r for r in rows}.values()))),
    st.builds(Optimize, st.booleans()),
    # delta-rs's RESTORE only: the hand-written Databricks one reads the target's metadata from commit files
    st.builds(Restore, st.integers(0, 4), st.just(False)),
    st.builds(SwitchFeed, st.booleans()),
    st.just(Vacuum()),
    st.just(CleanupLog()),
)


@st.composite
def long_histories(draw: Any, min_steps: int = 30, max_steps: int = 70) -> list[Op]:
    """Long histories as a scheduled job meets them (issue 45): appends, updates, deletes, MERGE, OPTIMIZE,
    RESTORE, feed switches, VACUUM and log cleanup, with a checkpoint every 10 versions (`LONG_HISTORY_TABLE`),
    and runs of the job between random steps, so that windows start before, at and after checkpoints."""
    steps: list[Op] = [Create(draw(new_rows(size=6)), draw(st.booleans()), dict(LONG_HISTORY_TABLE))]
    for _ in range(draw(st.integers(min_steps, max_steps))):
        steps.append(draw(long_changes))
        if draw(st.integers(0, 4)) == 0:
            steps.append(Run())
    steps.append(Run())
    return steps


#: The first id `keyed_histories` gives inserted rows (above every id the other operations draw).
FRESH_IDS = 1000


def _unique_ids(steps: list[Op], crashes: list[bool]) -> list[Op]:
    """The history with ``id`` unique in every table version (a mirror's key): created rows get 0.., rows that
    appended, overwrote or replaced the table fresh ids; updates, deletes and merges keep theirs (a merge's source
    is unique by id and updates the ids it matches). Each plain ``Run`` whose flag in ``crashes`` is set is
    preceded by a killed run."""
    fresh = iter(range(FRESH_IDS, 1 << 30))
    keyed: list[Op] = []
    flags = iter(crashes)
    for step in steps:
        if isinstance(step, Create):
            step.rows = [{**row, "id": number} for number, row in enumerate(step.rows)]
        elif isinstance(step, (Append, Overwrite, ReplaceAsSelect)):
            step.rows = [{**row, "id": next(fresh)} for row in step.rows]
        if type(step) is Run and next(flags, False):
            keyed.append(Crash())
        keyed.append(step)
    return keyed


@st.composite
def keyed_histories(draw: Any, max_steps: int = 12) -> list[Op]:
    """`histories` whose tables keep ``id`` unique, with killed runs (`Crash`) before some runs."""
    steps = draw(histories(max_steps))
    crashes = draw(st.lists(st.integers(0, 3).map(lambda n: n == 0), min_size=len(steps), max_size=len(steps)))
    return _unique_ids(steps, crashes)


@st.composite
def keyed_long_histories(draw: Any) -> list[Op]:
    """`long_histories` whose tables keep ``id`` unique (a mirror's key), with no killed runs."""
    steps = draw(long_histories())
    return _unique_ids(steps, [False] * len(steps))
