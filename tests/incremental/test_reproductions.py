"""Issue 23's reproductions of `incremental_to_mds` under a Delta table's real lifecycle, one test each.

Each was tried as a Databricks user would, on a real delta-rs table, and failed on the code before the issue:
OPTIMIZE turned an update into a duplicate, ``CREATE OR REPLACE TABLE AS SELECT`` was read from the feed as new
rows, a row replaced by one 0.5 ms later vanished, a late NULL or a VACUUM stopped the job for good, and a diff
read both versions whole. The tests take the `spark` fixture because the code they were first run against needed
a session; the code now reads a Delta path with delta-rs without one.
"""

from __future__ import annotations

import datetime
import json
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from streaming import LocalDataset
from streaming.incremental.change import IncrementalHistoryError
from streaming.spark import incremental_to_mds
from tests.incremental import databricks_log

CDF = {"delta.enableChangeDataFeed": "true"}
UTC = datetime.timezone.utc


def _run(table: Path, out: Path, **kwargs):
    return incremental_to_mds(str(table), str(out), progress=False, **kwargs)


def _rows(out: Path) -> Counter:
    return Counter(json.dumps(_plain(sample), sort_keys=True) for sample in LocalDataset(str(out)))


def _plain(sample: dict) -> dict:
    plain = {}
    for key, value in sample.items():
        if hasattr(value, "tolist"):
            value = value.tolist()
        if isinstance(value, (bytes, Decimal)):
            value = repr(value)
        plain[key] = value
    return plain


def _events(ids: list[int], text: str = "event") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "text": [f"{text} {i}" for i in ids]})


# -- 1. routine maintenance never changes what a run appends --------------------------------------------------
def test_an_optimize_between_an_update_and_the_run_changes_nothing(spark, tmp_path):
    """The same update, with and without an OPTIMIZE before the run: the same dataset, read from the feed."""
    from deltalake import DeltaTable, write_deltalake

    outs = {}
    for optimize in (False, True):
        table, out = tmp_path / f"t{optimize}", tmp_path / f"out{optimize}"
        write_deltalake(str(table), _events([0, 1]), configuration=CDF)
        write_deltalake(str(table), _events([2, 3]), mode="append")
        _run(table, out)
        DeltaTable(str(table)).update(new_values={"text": "changed"}, predicate="id = 1")
        if optimize:
            DeltaTable(str(table)).optimize.compact()  # dataChange=false: predictive optimization does it hourly
        result = _run(table, out)
        assert (result.method, result.samples, result.unapplied_changes) == ("change_data_feed", 1, 1)
        outs[optimize] = _rows(out)
    assert outs[True] == outs[False]
    assert sum(outs[True].values()) == 5, "the update's new value appended beside the old one, once"


def test_the_feed_and_the_changed_files_give_the_same_dataset_for_updates_and_deletes(spark, tmp_path):
    from deltalake import DeltaTable, write_deltalake

    table = tmp_path / "t"
    write_deltalake(str(table), _events(list(range(6))), configuration=CDF)
    _run(table, tmp_path / "feed")
    _run(table, tmp_path / "files", change_data_feed=False)
    DeltaTable(str(table)).update(new_values={"text": "u"}, predicate="id < 2")
    DeltaTable(str(table)).delete("id = 5")
    write_deltalake(str(table), _events([7]), mode="append")
    feed = _run(table, tmp_path / "feed")
    files = _run(table, tmp_path / "files", change_data_feed=False)
    assert (feed.method, files.method) == ("change_data_feed", "snapshot_diff")
    assert (feed.samples, feed.unapplied_changes) == (files.samples, files.unapplied_changes) == (3, 3)
    assert _rows(tmp_path / "feed") == _rows(tmp_path / "files")


# -- 2. replaces recognised by Delta's operation names; the feed's setting from the history ---------------------
def test_create_or_replace_table_as_select_with_the_same_rows_appends_nothing(spark, tmp_path):
    from deltalake import write_deltalake

    table, out = tmp_path / "t", tmp_path / "out"
    write_deltalake(str(table), _events([0, 1, 2]), configuration=CDF)
    _run(table, out)
    databricks_log.create_or_replace_as_select(table, _events([0, 1, 2]))  # saveAsTable(mode="overwrite")
    result = _run(table, out)
    assert (result.method, result.samples, result.unapplied_changes) == ("snapshot_diff", 0, 0)
    databricks_log.create_or_replace_as_select(table, _events([0, 1, 9]))
    result = _run(table, out)
    assert (result.samples, result.unapplied_changes) == (1, 1)
    assert sum(_rows(out).values()) == 4


def test_the_feed_switched_off_inside_the_window_is_seen_from_the_history(spark, tmp_path):
    from deltalake import DeltaTable, write_deltalake

    table, out = tmp_path / "t", tmp_path / "out"
    write_deltalake(str(table), _events([0]), configuration=CDF)
    _run(table, out)
    DeltaTable(str(table)).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    write_deltalake(str(table), _events([1]), mode="append")  # recorded nowhere in the feed
    DeltaTable(str(table)).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    write_deltalake(str(table), _events([2]), mode="append")
    with pytest.raises(ValueError, match="was not true at every one of those versions"):
        _run(table, out, change_data_feed=True)
    result = _run(table, out)
    assert (result.method, result.samples) == ("snapshot_diff", 2)


def test_a_databricks_restore_is_read_as_a_replace(spark, tmp_path):
    from deltalake import write_deltalake

    table, out = tmp_path / "t", tmp_path / "out"
    write_deltalake(str(table), _events([0, 1]), configuration=CDF)
    write_deltalake(str(table), _events([2]), mode="overwrite")
    _run(table, out)
    databricks_log.restore(table, 0)
    result = _run(table, out)
    assert (result.method, result.samples, result.unapplied_changes) == ("snapshot_diff", 2, 1)


# -- 3. row identity at full precision --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("column", "before", "after"),
    [
        (
            "ts",
            datetime.datetime(2024, 5, 1, 12, 0, 0, 250, tzinfo=UTC),
            datetime.datetime(2024, 5, 1, 12, 0, 0, 750, tzinfo=UTC),
        ),
        (
            "nested",
            {"at": datetime.datetime(2024, 5, 1, tzinfo=UTC)},
            {"at": datetime.datetime(2024, 5, 1, 0, 0, 0, 500, tzinfo=UTC)},
        ),
        ("value", 0.0, -0.0),
        ("value", float("nan"), 1.0),
        ("amount", Decimal("1.001"), Decimal("1.002")),
        ("blob", b"\x00", b"\x00\x00"),
    ],
)
def test_a_row_replaced_by_one_that_differs_below_a_millisecond_is_appended(spark, tmp_path, column, before, after):
    from deltalake import write_deltalake

    types = {
        "id": pa.int64(),
        "ts": pa.timestamp("us", tz="UTC"),
        "nested": pa.struct([("at", pa.timestamp("us", tz="UTC"))]),
        "value": pa.float64(),
        "amount": pa.decimal128(10, 3),
        "blob": pa.binary(),
    }
    base = {"id": 1, "ts": None, "nested": None, "value": 2.0, "amount": None, "blob": None}
    schema = pa.schema(list(types.items()))
    table, out = tmp_path / "t", tmp_path / "out"
    write_deltalake(str(table), pa.Table.from_pylist([{**base, column: before}], schema=schema))
    _run(table, out)
    write_deltalake(str(table), pa.Table.from_pylist([{**base, column: after}], schema=schema), mode="overwrite")
    result = _run(table, out)
    assert (result.samples, result.unapplied_changes) == (1, 1)
    write_deltalake(str(table), pa.Table.from_pylist([{**base, column: after}], schema=schema), mode="overwrite")
    assert _run(table, out).samples == 0, "the same row rewritten is the same row"


# -- 4. a job that never stops on data --------------------------------------------------------------------------
def test_a_late_null_in_a_column_that_never_held_one_is_stored(spark, tmp_path):
    from deltalake import write_deltalake

    schema = pa.schema([("id", pa.int64()), ("score", pa.float32()), ("label", pa.string())])
    table, out = tmp_path / "t", tmp_path / "out"
    write_deltalake(str(table), pa.Table.from_pylist([{"id": 0, "score": 0.5, "label": "a"}], schema=schema))
    _run(table, out)
    late = pa.Table.from_pylist([{"id": 1, "score": None, "label": None}], schema=schema)
    write_deltalake(str(table), late, mode="append")
    assert _run(table, out).samples == 1
    samples = sorted(LocalDataset(str(out)), key=lambda sample: int(sample["id"]))
    assert [(s["score"], s["label"]) for s in samples] == [(0.5, "a"), (None, None)]


def test_a_vacuumed_history_names_the_version_and_resync_recovers(spark, tmp_path):
    from deltalake import DeltaTable, write_deltalake

    table, out = tmp_path / "t", tmp_path / "out"
    write_deltalake(str(table), _events([0, 1, 2]))
    _run(table, out)
    DeltaTable(str(table)).update(new_values={"text": "changed"}, predicate="id = 0")
    write_deltalake(str(table), _events([3]), mode="append")
    DeltaTable(str(table)).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    with pytest.raises(IncrementalHistoryError, match=r"Version 1 is the first one missing\. Way out: .*resync=True"):
        _run(table, out)
    index = (out / "index.json").read_bytes()
    with pytest.raises(IncrementalHistoryError):
        _run(table, out)  # it stays stopped until someone takes the way out, changing nothing
    assert (out / "index.json").read_bytes() == index
    result = _run(table, out, resync=True)
    assert (result.method, result.previous_version, result.samples) == ("resync", 0, 2)
    assert sorted(_rows(out)) == sorted(
        json.dumps(_plain(s), sort_keys=True)
        for s in [
            {"id": 0, "text": "event 0"},
            {"id": 1, "text": "event 1"},
            {"id": 2, "text": "event 2"},
            {"id": 0, "text": "changed"},
            {"id": 3, "text": "event 3"},
        ]
    )
    assert _run(table, out).method == "up_to_date"
    write_deltalake(str(table), _events([4]), mode="append")
    assert _run(table, out).samples == 1, "after the resync the job goes on from the version it reached"


# -- 5. a diff whose cost follows the change ----------------------------------------------------------------------
def test_a_one_row_change_reads_only_the_files_it_touched(spark, tmp_path):
    """Every data file the change did not touch is moved away during the run: reading any of them would fail."""
    from deltalake import DeltaTable, write_deltalake

    table, out = tmp_path / "t", tmp_path / "out"
    for part in range(12):
        write_deltalake(str(table), _events(list(range(part * 10, part * 10 + 10))), mode="append")
    _run(table, out)
    before = {path.name for path in table.glob("*.parquet")}
    DeltaTable(str(table)).update(new_values={"text": "changed"}, predicate="id = 55")
    after = {path.name for path in table.glob("*.parquet")}
    touched = (before - after) | (after - before)
    removed = {f["path"] for f in _log_actions(table, "remove")}
    touched |= removed
    parked = tmp_path / "parked"
    parked.mkdir()
    untouched = [name for name in before & after if name not in touched]
    assert len(untouched) == 11
    for name in untouched:
        shutil.move(table / name, parked / name)
    try:
        result = _run(table, out, change_data_feed=False)
    finally:
        for name in untouched:
            shutil.move(parked / name, table / name)
    assert (result.method, result.samples, result.unapplied_changes) == ("snapshot_diff", 1, 1)


def _log_actions(table: Path, kind: str) -> list[dict]:
    found = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in filter(None, commit.read_text().split("\n")):  # not splitlines(): U+0085 may be in a value
            action = json.loads(line)
            if kind in action:
                found.append(action[kind])
    return found
