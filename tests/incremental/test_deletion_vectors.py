"""The scheduled job on tables with Delta deletion vectors, what a Databricks ``DELETE``, ``UPDATE`` or ``MERGE``
leaves where they are enabled: delta-rs's Arrow reader refuses such tables (its error was all a run gave before).

The tables are `tests.incremental.row_tracked_table.TrackedTable`'s (deletion vectors inline and in files, copy on
write, OPTIMIZE, checkpoints), and delta-rs's query engine reads back every version, applying the vectors itself.
Generated histories run both modes after random steps: a mirror keyed by the user's ``id`` must hold exactly the
table's rows; an append-only dataset must hold every live row, only rows the table once had, and as many as its
runs appended.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming import LocalDataset
from streaming.spark import incremental_to_mds
from tests.incremental.row_tracked_table import GENERATED_RUNS, TrackedTable

#: Ids drawn from the first rows' range mostly hit a row; marking weighs twice, as it is what is tested here.
MARK = st.tuples(st.just("mark"), st.tuples(st.integers(0, 12), st.booleans()))
STEPS = st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 8)),
    MARK,
    MARK,
    st.tuples(st.just("delete"), st.integers(0, 12)),
    st.tuples(st.just("update"), st.integers(0, 12)),
    st.tuples(st.just("optimize"), st.none()),
    st.tuples(st.just("run"), st.sampled_from([0, 0, 1, 2])),
)


def _values(out: Path) -> Counter:
    return Counter((int(sample["id"]), sample["name"]) for sample in LocalDataset(str(out)))


def _live(table: TrackedTable) -> Counter:
    return Counter((row["id"], row["name"]) for row in table.rows.values())


def test_both_modes_read_a_table_with_deletion_vectors(tmp_path):
    table = TrackedTable(tmp_path / "t", [{"id": i, "name": f"n{i}"} for i in range(10)], deletion_vectors=True)
    appended, mirrored = tmp_path / "appended", tmp_path / "mirrored"
    incremental_to_mds(str(table.path), str(appended), progress=False)
    incremental_to_mds(str(table.path), str(mirrored), mode="mirror", key=["id"], progress=False)
    table.mark_deleted({3}, in_file=False)
    table.insert([{"id": 20, "name": "late"}])
    run = incremental_to_mds(str(table.path), str(appended), progress=False)
    assert (run.method, run.samples, run.unapplied_changes) == ("snapshot_diff", 1, 1)
    assert _values(appended) == _live(table) + Counter({(3, "n3"): 1})
    run = incremental_to_mds(str(table.path), str(mirrored), mode="mirror", key=["id"], progress=False)
    assert (run.removed, run.samples) == (1, 1) and _values(mirrored) == _live(table)


@pytest.mark.slow
@GENERATED_RUNS
@given(st.integers(4, 20), st.lists(STEPS, min_size=1, max_size=12))
def test_append_and_mirror_runs_agree_with_the_table_after_every_generated_history(first, steps):
    work = Path(tempfile.mkdtemp(prefix="mds-vectors-"))
    try:
        counter = first
        table = TrackedTable(work / "t", [{"id": i, "name": f"n{i}"} for i in range(first)], deletion_vectors=True)
        ever = set(_live(table))
        appended_rows = 0
        for kind, argument in [*steps, ("run", 0)]:
            if kind == "insert":
                table.insert([{"id": counter + i, "name": f"n{counter + i}"} for i in range(argument)])
                counter += argument
            elif kind == "mark":
                table.mark_deleted({argument[0]}, in_file=argument[1])
            elif kind == "delete":
                table.delete({argument})
            elif kind == "update":
                table.update({argument}, f"v{table.version}")
            elif kind == "optimize" and table.files:
                table.optimize()
            elif kind == "run":
                ever |= set(_live(table))
                mirrored = incremental_to_mds(
                    str(table.path), str(work / "mirror"), mode="mirror", key=["id"], progress=False
                )
                assert _values(work / "mirror") == _live(table), f"mirror after {steps}: {mirrored}"
                appended_rows += incremental_to_mds(str(table.path), str(work / "append"), progress=False).samples
                held = _values(work / "append")
                assert held & _live(table) == _live(table), f"append lost live rows after {steps}"
                assert set(held) <= ever and sum(held.values()) == appended_rows
                if argument:
                    table.checkpoint(drop_commits=False, parts=argument)
            ever |= set(_live(table))
    finally:
        shutil.rmtree(work, ignore_errors=True)
