"""A mirror keyed by Delta row ids (`streaming.delta.row_ids`): ``mode="mirror"`` without ``key``.

The tables are written by `tests.incremental.row_tracked_table.TrackedTable` as the Delta protocol's writers
must (delta-rs cannot create them), and every version is read back with delta-rs. The oracle is the writer's
own bookkeeping: after every run the dataset must hold exactly the live rows, each under the stable id the
writer gave it (``_row_id``), through inserts, deletes, updates that keep ids, an ``OPTIMIZE``, and a log
cleaned up behind a checkpoint. The table's ``id`` column is plain data here, so duplicates in it are fine:
the row id is the key.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming import LocalDataset
from streaming.delta.errors import DeltaLogError
from streaming.delta.log_replay import replay
from streaming.delta.row_ids import ROW_ID
from streaming.incremental.change import IncrementalHistoryError
from streaming.spark import incremental_to_mds
from tests.cli.conftest import run_cli
from tests.incremental.row_tracked_table import GENERATED_RUNS, TrackedTable

#: One step of a generated history: a table operation, or a mirror run (then, maybe, a checkpoint that drops the
#: commit files the run no longer needs, as Delta's log cleanup does).
STEPS = st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 12)),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("update"), st.integers(0, 6)),
    st.tuples(st.just("optimize"), st.none()),
    st.tuples(st.just("mark"), st.tuples(st.integers(0, 6), st.booleans())),  # DELETE by deletion vector
    st.tuples(st.just("run"), st.sampled_from([0, 0, 1, 3])),  # then a checkpoint in that many parts (0: none)
)


def _rows(count: int, start: int = 0, name: str = "user") -> list[dict]:
    return [{"id": i % 7, "name": f"{name} {i}"} for i in range(start, start + count)]  # `id` repeats: not a key


def _mirror(table: TrackedTable, out: Path, **options):
    return incremental_to_mds(str(table.path), str(out), mode="mirror", size_limit=200, progress=False, **options)


def _held(out: Path) -> dict[int, dict]:
    samples = list(LocalDataset(str(out)))
    held = {int(sample[ROW_ID]): {"id": int(sample["id"]), "name": sample["name"]} for sample in samples}
    assert len(held) == len(samples), "a row id is stored twice"
    return held


def test_a_mirror_without_key_follows_row_ids_through_deletes_updates_optimize_and_a_cleaned_log(tmp_path):
    table = TrackedTable(tmp_path / "events", _rows(40))
    out = tmp_path / "events_mds"
    first = _mirror(table, out)
    assert (first.version, first.samples, first.method) == (0, 40, "snapshot")
    assert _held(out) == table.rows

    table.delete({3})  # every row with id 3: rows of several shards
    table.update({5}, "relabelled")
    table.insert(_rows(10, start=40, name="late"))
    second = _mirror(table, out)
    assert second.method == "snapshot_diff"
    updated = sum(row["name"] == "relabelled" for row in table.rows.values())
    assert second.removed == 6 + updated and second.samples == 10 + updated
    assert _held(out) == table.rows

    shards = {shard["raw_data"]["basename"] for shard in json.loads((out / "index.json").read_text())["shards"]}
    table.optimize()  # dataChange=false: the ids are materialized, nothing changes for the mirror
    assert _mirror(table, out).method == "no_data_change"
    table.update({1}, "again")  # removes the compacted file: its rows' ids are read from the materialized column
    third = _mirror(table, out)
    assert third.method == "snapshot_diff" and _held(out) == table.rows
    assert shards != {shard["raw_data"]["basename"] for shard in json.loads((out / "index.json").read_text())["shards"]}

    table.delete({4})
    table.checkpoint(drop_commits=True)  # the log now starts at a checkpoint: this change can no longer be read
    with pytest.raises(IncrementalHistoryError, match=r"mode='mirror', key=\['_row_id'\], resync=True"):
        _mirror(table, out)
    deleted = sum(row["id"] == 4 for row in _held(out).values())
    resynced = _mirror(table, out, key=[ROW_ID], resync=True)  # the way out the error names, ids replayed
    assert (resynced.method, resynced.removed, resynced.samples) == ("resync", deleted, 0)
    assert _held(out) == table.rows

    fresh = tmp_path / "fresh_mds"  # a first run on a table whose log starts at a checkpoint
    assert _mirror(table, fresh).samples == len(table.rows)
    assert _held(fresh) == table.rows


@pytest.mark.slow
@GENERATED_RUNS
@given(st.integers(0, 20), st.booleans(), st.lists(STEPS, min_size=1, max_size=12))
def test_a_row_id_mirror_holds_every_row_under_its_id_after_every_generated_history(first, vectors, steps):
    work = Path(tempfile.mkdtemp(prefix="mds-row-ids-"))
    try:
        table = TrackedTable(work / "t", _rows(first), deletion_vectors=vectors)
        out = work / "t_mds"
        counter = first
        for kind, argument in [*steps, ("run", 0)]:
            if kind == "insert":
                table.insert(_rows(argument, start=counter, name="new"))
                counter += argument
            elif kind == "delete":
                table.delete({argument})
            elif kind == "update":
                table.update({argument}, f"updated {table.version}")
            elif kind == "optimize" and table.files:
                table.optimize()
            elif kind == "mark" and vectors:
                table.mark_deleted({argument[0]}, in_file=argument[1])
            elif kind == "run":
                _mirror(table, out)
                assert _held(out) == table.rows, f"after {steps}"
                if argument:
                    table.checkpoint(drop_commits=True, parts=argument)
        fresh = work / "fresh_mds"
        _mirror(table, fresh)
        assert _held(fresh) == table.rows
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_audit_names_row_ids_and_inspect_shows_the_key(tmp_path):
    table = TrackedTable(tmp_path / "t", _rows(12))
    out = tmp_path / "t_mds"
    code, first, err = run_cli("incremental", str(table.path), str(out), "--mode", "mirror", "--json")
    assert code == 0 and first["samples"] == 12, err
    table.delete({2})
    code, second, err = run_cli("incremental", str(table.path), str(out), "--mode", "mirror", "--json")
    assert code == 0 and second["removed"] == 2, err
    code, report, err = run_cli("inspect", str(out), "--json")
    assert code == 0, err
    audit = json.dumps(report)
    assert '"_row_id"' in audit and _held(out) == table.rows
    code, _, err = run_cli("incremental", str(table.path), str(out), "--mode", "mirror", "--key", "id")
    assert code == 1 and "by key ['_row_id']" in err, err


def test_what_cannot_give_row_ids_is_refused_before_anything_is_written(tmp_path):
    clash = TrackedTable(tmp_path / "clash", [{"id": 1, "name": "a", ROW_ID: 9}], extra_column=ROW_ID)
    with pytest.raises(ValueError, match="has a column named '_row_id'"):
        _mirror(clash, tmp_path / "clash_mds")
    assert not (tmp_path / "clash_mds").exists()

    table = TrackedTable(tmp_path / "t", _rows(5))
    with pytest.raises(ValueError, match="keyed by Delta row ids, which the Change Data Feed does not carry"):
        _mirror(table, tmp_path / "feed_mds", change_data_feed=True)

    add = json.loads((table.path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[-1])
    assert "add" in add
    log = table.path / "_delta_log" / f"{0:020d}.json"
    log.write_text(log.read_text().replace(', "baseRowId": 0', ""))  # a writer that broke the protocol
    with pytest.raises(ValueError, match="gives no baseRowId for part-"):
        _mirror(table, tmp_path / "broken_mds")
    assert not (tmp_path / "broken_mds").exists()


def test_rows_a_deletion_vector_marks_leave_and_the_others_keep_their_ids(tmp_path):
    table = TrackedTable(tmp_path / "t", _rows(30), deletion_vectors=True)
    out = tmp_path / "t_mds"
    _mirror(table, out)
    table.mark_deleted({2}, in_file=False)  # a vector inline in the log
    assert _mirror(table, out).removed == 4 and _held(out) == table.rows
    table.mark_deleted({5}, in_file=True)  # a vector file of the table, replacing the inline one
    table.update({6}, "kept id")  # copy on write of a file with a vector: its surviving rows' ids materialized
    assert _mirror(table, out).method == "snapshot_diff" and _held(out) == table.rows
    assert table.vectors_stored == 1
    fresh = tmp_path / "fresh_mds"  # a first run reads files with vectors whole and drops the marked rows
    _mirror(table, fresh)
    assert _held(fresh) == table.rows


def test_a_damaged_deletion_vector_is_refused_naming_the_file(tmp_path):
    table = TrackedTable(tmp_path / "t", _rows(12), deletion_vectors=True)
    out = tmp_path / "t_mds"
    _mirror(table, out)
    published = (out / "index.json").read_bytes()
    table.mark_deleted({1}, in_file=True)
    (vector_file,) = (table.path / "dv").iterdir()
    data = bytearray(vector_file.read_bytes())
    data[-5] ^= 0xFF  # one bit of the bitmap: the checksum no longer matches
    vector_file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"deletion vector of .*part-.*fails its size or checksum check"):
        _mirror(table, out)
    assert (out / "index.json").read_bytes() == published


def test_a_log_that_starts_at_a_damaged_v2_checkpoint_is_refused_not_misread(tmp_path):
    """A V2 checkpoint is where the replay starts (no commit before it is read); one that holds no ``metaData`` or
    ``protocol`` action is named as a damaged log, not read as a table without columns or files."""
    from pyarrow.fs import LocalFileSystem, SubTreeFileSystem

    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{7:020d}.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json").write_text("{}")
    (log / f"{8:020d}.json").write_text("")
    filesystem = SubTreeFileSystem(str(tmp_path), LocalFileSystem())

    def read_text(name: str) -> str | None:
        return (tmp_path / name).read_text() if (tmp_path / name).exists() else None

    with pytest.raises(DeltaLogError, match=r"^Version 8 of the Delta table t has no metaData action"):
        replay(filesystem, read_text, "t", 8)
