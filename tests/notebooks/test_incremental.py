"""`incremental_to_mds` on local paths: each table version's new rows appended exactly once, atomically.

The semantics for every kind of history are judged by the generated-history oracle (``tests/incremental``); these
are the job's everyday cases and its refusals.
"""

from __future__ import annotations

import json

import pytest

from streaming.incremental import append
from streaming.spark import dataframe_to_mds, incremental_to_mds
from streaming.spark.table_input import frame_from_arrow
from tests.notebooks.helpers import dataset_ids, event_rows, files_below, write_events


def run(table, out, **kwargs):
    return incremental_to_mds(str(table), str(out), progress=False, **kwargs)


@pytest.mark.parametrize("change_data_feed", [True, False])
def test_versions_are_appended_once_and_in_order(spark, tmp_path, change_data_feed):
    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 50, change_data_feed=change_data_feed)
    write_events(table, 50, 70)
    write_events(table, 70, 80)

    first = run(table, out, version=1)
    assert (first.method, first.previous_version, first.version, first.samples) == ("snapshot", None, 1, 70)
    index = (out / "index.json").read_bytes()
    assert run(table, out, version=1).method == "up_to_date"
    assert (out / "index.json").read_bytes() == index

    latest = run(table, out)
    method = "change_data_feed" if change_data_feed else "snapshot_diff"
    assert (latest.method, latest.previous_version, latest.version, latest.samples) == (method, 1, 2, 10)
    assert dataset_ids(str(out), tmp_path / "cache") == list(range(80))
    (record_path,) = out.glob("increments/v00000002-*/increment.json")
    record = json.loads(record_path.read_text())
    assert record["previous_version"] == 1 and record["samples"] == 10 and record["run"]
    sample = next(s for s in _samples(out) if int(s["id"]) == 75)
    assert sample["text"] == "event 75" and sample["score"].tolist() == [37.5, -37.5]


def _samples(out):
    from streaming import LocalDataset

    return list(LocalDataset(str(out)))


def test_rewritten_files_bring_no_rows_and_are_remembered(spark, tmp_path):
    from deltalake import DeltaTable

    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 20)
    write_events(table, 20, 40)
    run(table, out)
    DeltaTable(str(table)).optimize.compact()
    rewritten = run(table, out)
    assert (rewritten.method, rewritten.version, rewritten.samples) == ("no_data_change", 2, 0)
    before = files_below(out)
    again = run(table, out)
    assert (again.method, again.previous_version, again.version) == ("up_to_date", 2, 2)
    assert files_below(out) == before
    assert dataset_ids(str(out), tmp_path / "cache") == list(range(40))


def test_deletes_are_counted_not_applied(spark, tmp_path):
    from deltalake import DeltaTable

    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 30, change_data_feed=True)
    run(table, out)
    DeltaTable(str(table)).delete("id < 4")
    write_events(table, 30, 35)
    result = run(table, out)
    assert (result.method, result.samples, result.unapplied_changes) == ("change_data_feed", 5, 4)
    assert dataset_ids(str(out), tmp_path / "cache") == list(range(35))


def test_continues_from_the_version_dataframe_to_mds_recorded(spark, tmp_path):
    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 25)
    converted = dataframe_to_mds(str(table), str(out), progress=False)
    assert converted.table_version == 0
    write_events(table, 25, 40)
    result = run(table, out)
    assert (result.method, result.previous_version, result.samples) == ("snapshot_diff", 0, 15)
    assert dataset_ids(str(out), tmp_path / "cache") == list(range(40))


def test_a_run_that_dies_before_the_index_write_changes_nothing(spark, tmp_path, monkeypatch):
    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 10)
    run(table, out)
    write_events(table, 10, 16)
    index = (out / "index.json").read_bytes()

    def die(*args, **kwargs):
        raise KeyboardInterrupt("cluster lost")

    with monkeypatch.context() as patch:
        patch.setattr(append, "commit_run", die)
        with pytest.raises(KeyboardInterrupt):
            run(table, out)
    assert (out / "index.json").read_bytes() == index
    assert dataset_ids(str(out), tmp_path / "cache-before") == list(range(10))

    retried = run(table, out)
    assert (retried.previous_version, retried.version, retried.samples) == (0, 1, 6)
    assert dataset_ids(str(out), tmp_path / "cache-after") == list(range(16))
    indexed = {shard["zip_data"]["basename"] for shard in json.loads((out / "index.json").read_text())["shards"]}
    staged = {name for name in files_below(out) if name.startswith("increments/v00000001-") and name.endswith(".zstd")}
    dead = staged - indexed
    assert len(staged & indexed) == retried.shards, "the dead run's shards must not be published beside the new ones"
    assert dead and all(name.split("/")[1] != next(iter(staged & indexed)).split("/")[1] for name in dead)


def test_refusals_name_the_problem_and_the_choices(spark, tmp_path):
    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 10)
    write_events(table, 10, 12)
    run(table, out)

    with pytest.raises(ValueError, match=r"already holds version 1 .* version 0 is older\. Choices: version >= 1"):
        run(table, out, version=0)
    write_events(table, 12, 13)
    with pytest.raises(ValueError, match="change_data_feed=True but .* delta.enableChangeDataFeed was not true"):
        run(table, out, change_data_feed=True)

    other = tmp_path / "other"
    write_events(other, 0, 2)
    with pytest.raises(ValueError, match=r"holds versions of \[.*events'\], not of .*other.*one dataset follows one"):
        run(other, out)

    foreign = tmp_path / "foreign"
    dataframe_to_mds(spark.range(0, 5, 1, 1), str(foreign), progress=False)
    with pytest.raises(ValueError, match="holds 1 shard but no record of which version .* Choices: another `out`"):
        run(table, foreign)

    frame_from_arrow(spark, event_rows(0, 3)).createOrReplaceTempView("plain_events")  # Spark 3.5 too (arrays)
    with pytest.raises(ValueError, match="'plain_events' is not a Delta table"):
        run("plain_events", tmp_path / "plain")


def test_a_column_added_to_the_table_later_is_left_out_and_named(spark, tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 10)
    run(table, out)
    widened = event_rows(10, 12).append_column("extra", pa.array([1, 2], pa.int32()))
    write_deltalake(str(table), widened, mode="append", schema_mode="merge")
    result = run(table, out)
    assert (result.samples, result.ignored_columns) == (2, ["extra"])
    assert {name for sample in _samples(out) for name in sample} == {"id", "text", "score"}
    write_deltalake(str(table), event_rows(12, 13).append_column("extra", pa.array([3], pa.int32())), mode="append")
    with pytest.raises(ValueError, match="Cannot append to .* its shards have columns"):
        run(table, out, columns=["id", "text", "score", "extra"])  # asked for explicitly: the shards differ


def test_a_full_overwrite_with_the_change_data_feed_on_appends_nothing(spark, tmp_path):
    from deltalake import write_deltalake

    from tests.notebooks.helpers import event_rows

    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 13, change_data_feed=True)
    run(table, out)
    write_deltalake(str(table), event_rows(0, 13), mode="overwrite")  # the same 13 rows, every file rewritten
    result = run(table, out)
    assert (result.method, result.samples, result.unapplied_changes) == ("change_data_feed", 0, 0)
    write_events(table, 13, 15)
    assert run(table, out).samples == 2
    assert dataset_ids(str(out), tmp_path / "cache") == list(range(15))


def test_the_snapshot_diff_compares_map_columns(spark, tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    def rows(start: int, stop: int) -> pa.Table:
        ids = list(range(start, stop))
        tags = [[("b", i), ("a", -i)] if i % 2 else [("a", -i), ("b", i)] for i in ids]
        return pa.table({"id": pa.array(ids, pa.int64()), "tags": pa.array(tags, pa.map_(pa.string(), pa.int64()))})

    table, out = tmp_path / "tagged", tmp_path / "out"
    write_deltalake(str(table), rows(0, 6))
    run(table, out)
    write_deltalake(str(table), rows(6, 9), mode="append")
    result = run(table, out, change_data_feed=False)
    assert (result.method, result.samples, result.unapplied_changes) == ("snapshot_diff", 3, 0)
    assert sorted(int(s["id"]) for s in _samples(out)) == list(range(9))


def test_two_runs_for_one_version_cannot_both_append_it(spark, tmp_path, monkeypatch):
    table, out = tmp_path / "events", tmp_path / "out"
    write_events(table, 0, 10)
    run(table, out)
    write_events(table, 10, 14)
    publish = append.commit_run
    overtaken: list = []

    def racing_publish(*args, **kwargs):
        if not overtaken:  # the first run to commit is overtaken by a second run for the same version
            overtaken.append(None)
            overtaken[0] = run(table, out)
        return publish(*args, **kwargs)

    monkeypatch.setattr(append, "commit_run", racing_publish)
    with pytest.raises(RuntimeError, match="Another run updated .* now holds version 1 .* started from 0"):
        run(table, out)
    assert overtaken[0].samples == 4
    assert dataset_ids(str(out), tmp_path / "cache") == list(range(14))
    assert len(list(out.glob("increments/v00000001-*"))) == 2, "each run writes its own folder"
