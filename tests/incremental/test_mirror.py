"""Mirror mode (`streaming.incremental.mirror`): the dataset equals the table, at the cost of the shards a change
touches.

The oracle: `tests.incremental.histories.keyed_histories` (the lifecycle oracle's generated histories with ``id``
unique in every version, killed runs added) run in mirror mode on one dataset reading the feed and one reading the
changed files; after every run each must hold exactly the rows of the version it reached
(`tests.incremental.model.mirror`), read back through ``LocalDataset``. A run may stop only after a VACUUM, with
`IncrementalHistoryError`; the oracle then takes the way out (``resync=True``) and checks it too. A killed run
(its shards and key map written, its commit not made) must leave the dataset as it was, and the next run must land
without duplicates or loss. Beside it: what a run reads and writes (only the touched shards), the refusals, the
audit, vacuum's retention of replaced shards, and streaming-community 0.14.2 reading a mirrored dataset.

``MDS_MIRROR_EXAMPLES`` sets the number of histories (default 20); ``MDS_MIRROR_LONG_EXAMPLES`` the number of long
ones (`tests.incremental.histories.keyed_long_histories`: a checkpoint every 10 versions, OPTIMIZE, VACUUM and log
cleanup; default 2), where no bound on what the log declares may refuse the healthy table.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections import Counter
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from streaming.format import commit_log
from streaming.format.vacuum import vacuum
from streaming.incremental import mirror
from streaming.incremental.change import IncrementalHistoryError
from streaming.incremental.result import IncrementResult
from streaming.spark import incremental_to_mds
from streaming.storage.dataset_root import DatasetRoot
from tests.cli.conftest import run_cli
from tests.incremental import histories as h
from tests.incremental.model import TableModel, dataset_rows
from tests.incremental.model import mirror as mirrored
from tests.incremental.test_oracle import Subject, _commit_run

EXAMPLES = int(os.environ.get("MDS_MIRROR_EXAMPLES", "20"))
LONG_EXAMPLES = int(os.environ.get("MDS_MIRROR_LONG_EXAMPLES", "2"))
KEY = ["id"]


class Killed(BaseException):
    """Stands for the process dying: nothing in the run catches it."""


def _mirror(table: Path, subject: Subject, **options) -> IncrementResult:
    return incremental_to_mds(
        str(table),
        subject.out,
        mode="mirror",
        key=KEY,
        change_data_feed=subject.change_data_feed,
        size_limit=300,  # a few rows a shard: changes touch some shards and leave others
        progress=False,
        **options,
    )


def _check(subject: Subject, model: TableModel) -> None:
    expected = mirrored(model, subject.runs, subject.columns)
    held = dataset_rows(subject.out, subject.columns)
    assert held == expected, (
        f"mirror {subject.out} (change_data_feed={subject.change_data_feed}) after runs {subject.runs}: "
        f"{sum((held - expected).values())} rows too many, {sum((expected - held).values())} missing"
    )


def _run_or_resync(subject: Subject, table: Path, model: TableModel) -> None:
    """One run; where the history is gone (only after a VACUUM), the documented way out."""
    try:
        result = _mirror(table, subject)
    except IncrementalHistoryError as err:
        assert model.vacuumed_after is not None and subject.held is not None
        assert subject.held < model.vacuumed_after, f"history error without a vacuum after {subject.held}: {err}"
        assert "mode='mirror', key=['id'], resync=True" in str(err) and str(err.version) in str(err)
        result = _mirror(table, subject, resync=True)
        assert result.method == "resync"
        _commit_run(subject, result, model, resync=True)
        return
    _commit_run(subject, result, model)


def _crash(subject: Subject, table: Path, model: TableModel) -> None:
    """A run killed between writing its files and its commit leaves the dataset as it was."""
    before = commit_log.read_snapshot(DatasetRoot(subject.out)).version if subject.runs else 0

    def die(*args, **kwargs):
        raise Killed

    with mock.patch.object(mirror, "commit_run", die):
        try:
            _mirror(table, subject)
        except Killed:
            pass
        except IncrementalHistoryError:
            with contextlib.suppress(Killed):  # the history is gone: the way out runs, and is killed too
                _mirror(table, subject, resync=True)
    if subject.runs:
        assert commit_log.read_snapshot(DatasetRoot(subject.out)).version == before


def _race(subject: Subject, table: Path, model: TableModel) -> None:
    """Two mirror runs from one state reach their commit together: exactly one lands, the other changes nothing."""
    barrier = threading.Barrier(2, timeout=20)
    publish = mirror.commit_run
    outcomes: list[object] = []

    def meet_then_publish(*args, **kwargs):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        return publish(*args, **kwargs)

    def attempt() -> None:
        try:
            outcomes.append(_mirror(table, subject))
        except Exception as err:
            outcomes.append(err)

    with mock.patch.object(mirror, "commit_run", meet_then_publish):
        threads = [threading.Thread(target=attempt) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    committed = [out for out in outcomes if isinstance(out, IncrementResult) and out.method != "up_to_date"]
    errors = [out for out in outcomes if not isinstance(out, IncrementResult)]
    if any(isinstance(error, IncrementalHistoryError) for error in errors):
        _run_or_resync(subject, table, model)  # judged (and resynced) as a single run
        return
    assert len(outcomes) == 2 and len(committed) <= 1, f"two mirror runs from one state both committed: {outcomes}"
    for error in errors:
        assert isinstance(error, RuntimeError) and "Another run updated" in str(error), repr(error)
    for result in committed:
        _commit_run(subject, result, model)


def _play(steps: list[h.Op], work: Path) -> list[Subject]:
    table = work / "table"
    model = TableModel()
    subjects = [Subject(str(work / "auto"), None), Subject(str(work / "files"), False)]
    for step in steps:
        if not isinstance(step, h.Run):
            step.apply(table, model)
            h.check_table(table, model)
            continue
        for subject in subjects:
            if isinstance(step, h.Crash):
                _crash(subject, table, model)
            elif isinstance(step, h.Race):
                _race(subject, table, model)
            else:
                _run_or_resync(subject, table, model)
            _check(subject, model)
    return subjects


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(h.keyed_histories())
def test_a_mirror_holds_the_table_after_every_generated_history_and_crash(steps):
    work = Path(tempfile.mkdtemp(prefix="mds-mirror-"))
    try:
        _play(steps, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(h.keyed_long_histories())
def test_a_mirror_holds_the_table_after_long_histories_with_checkpoints(steps):
    """Issue 45, item 6: a mirror from an early version through checkpoints, OPTIMIZE, VACUUM and log cleanup."""
    work = Path(tempfile.mkdtemp(prefix="mds-mirror-long-"))
    try:
        _play(steps, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _rows(ids, grp="a") -> list[dict]:
    return [{"id": i, "grp": grp, "val": float(i), "nums": [i]} for i in ids]


@pytest.mark.parametrize("feed", [True, False])
def test_a_known_history_deletes_updates_merges_and_recovers_from_a_crash(feed, tmp_path):
    steps = [
        h.Create(_rows(range(40)), feed=feed),
        h.Run(),
        h.Delete([3]),
        h.Update([10, 11], "u"),
        h.Crash(),
        h.Run(),
        h.Merge(_rows([12, 500], grp="m")),
        h.Optimize(zorder=True),
        h.Run(),
        h.Overwrite(_rows(range(1000, 1005)), same_rows=False),
        h.Race(),
        h.Restore(1, databricks=False),
        h.Run(),
    ]
    subjects = _play(steps, tmp_path)
    assert all(len(subject.runs) >= 4 for subject in subjects)


def test_after_a_vacuum_the_way_out_resyncs_the_mirror(tmp_path, monkeypatch):
    """VACUUM took the files the change needs: the run stops, and resync=True brings the mirror to the table."""
    resyncs = []
    stored = mirror._stored
    monkeypatch.setattr(mirror, "_stored", lambda *args: resyncs.append(1) or stored(*args))
    steps = [
        h.Create(_rows(range(30)), feed=False),
        h.Run(),
        h.Update([4, 5], "u"),
        h.Delete([20]),
        h.Merge(_rows([6, 700], grp="m")),
        h.Vacuum(),
        h.Crash(),
        h.Run(),
    ]
    _play(steps, tmp_path)
    assert resyncs, "the history was readable: this test no longer reaches resync"


def _table(tmp_path: Path, count: int, **configuration: str) -> str:
    from deltalake import write_deltalake

    table = str(tmp_path / "table")
    rows = pa.table({"id": pa.array(range(count), pa.int64()), "text": [f"row {i}" for i in range(count)]})
    write_deltalake(table, rows, configuration={"delta.enableChangeDataFeed": "true", **configuration})
    return table


def _run(table: str, out: str, **options) -> IncrementResult:
    return incremental_to_mds(table, out, mode="mirror", key=KEY, size_limit=400, progress=False, **options)


def test_only_the_shards_holding_a_removed_row_are_read_and_rewritten(tmp_path):
    from deltalake import DeltaTable

    table, out = _table(tmp_path, 200), str(tmp_path / "out")
    first = _run(table, out)
    assert first.shards >= 20
    before = commit_log.read_snapshot(DatasetRoot(out)).shards
    DeltaTable(table).delete("id = 57")
    reads: list[str] = []
    read_bytes = DatasetRoot.read_bytes

    def recorded(self, relative, *args, **kwargs):
        reads.append(relative)
        return read_bytes(self, relative, *args, **kwargs)

    with mock.patch.object(DatasetRoot, "read_bytes", recorded):
        result = _run(table, out)
    assert (result.removed, result.shards_rewritten, result.samples) == (1, 1, 0)
    old_shards = {entry["zip_data"]["basename"] for entry in before}
    read_shards = [path for path in reads if path in old_shards]
    assert len(read_shards) == 1, read_shards
    after = commit_log.read_snapshot(DatasetRoot(out)).shards
    assert len(after) == len(before)
    assert [e for e in after if e["zip_data"]["basename"] in old_shards] == [
        e for e in before if e["zip_data"]["basename"] != read_shards[0]
    ]
    assert after[-1]["samples"] == next(e for e in before if e["zip_data"]["basename"] == read_shards[0])["samples"] - 1
    assert result.bytes_read > 0 and result.bytes_written > 0
    assert 57 not in {sample["id"] for sample in _samples(out)}


def test_a_key_map_pointing_at_another_row_drops_nothing(tmp_path):
    """A key map damaged (or planted) to place a removed key at another row's sample: the run checks each dropped
    sample's stored key first, refuses naming the shard and the samples, and the dataset stays as it was."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from streaming.convert import key_map

    table, out = _table(tmp_path, 200), str(tmp_path / "out")
    _run(table, out)
    root = DatasetRoot(out)
    state = commit_log.read_snapshot(root)
    [name] = key_map.mirror_record(state)["files"]
    entries = pq.read_table(os.path.join(out, name)).to_pylist()
    assert entries[57]["key"] == key_map.key_digests(pa.table({"id": pa.array([57], pa.int64())}), {"id": "int64"})[0]
    digest = {row["sample"]: row["key"] for row in entries if row["shard"] == entries[57]["shard"]}
    victim = next(sample for sample in digest if sample != entries[57]["sample"])
    entries[57]["sample"] = victim  # the key of id 57 now points at another row of its shard
    key_map.write(root, name, pa.Table.from_pylist(entries, schema=key_map.SCHEMA))
    with open(os.path.join(out, "index.json")) as file:
        index_before = file.read()

    DeltaTable(table).delete("id = 57")
    with pytest.raises(commit_log.LogDamagedError, match=f"samples \\[{victim}\\] of shard"):
        _run(table, out)
    with open(os.path.join(out, "index.json")) as file:
        assert file.read() == index_before
    assert len(_samples(out)) == 200


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_rewritten_shards_keep_their_format_and_pass_verify(compression, tmp_path, capsys):
    """Copy on write keeps the shard's compression and digests: `verify` checks every file's hash and samples
    (it lists every file the index does not name, as replaced shards kept for readers in flight are)."""
    from deltalake import DeltaTable

    from streaming.cli import main

    table, out = _table(tmp_path, 60), str(tmp_path / "out")
    _run(table, out, compression=compression, hashes=["sha1", "xxh64"])
    DeltaTable(table).delete("id % 10 = 0")
    DeltaTable(table).delete("id >= 40 AND id < 60")  # whole shards emptied: removed without a copy
    result = _run(table, out, compression=compression, hashes=["sha1", "xxh64"])
    assert result.removed == 24 and result.bytes_written > 0
    shards = commit_log.read_snapshot(DatasetRoot(out)).shards
    rewritten = [entry for entry in shards if "/rewritten/" in entry["raw_data"]["basename"]]
    assert rewritten and all(bool(entry["zip_data"]) == bool(compression) for entry in rewritten)
    assert all(set(entry["raw_data"]["hashes"]) == {"sha1", "xxh64"} for entry in rewritten)
    main(["verify", out, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["shards_checked"] == len(shards)
    assert [p for p in report["problems"] if p["problem"] != "not referenced by the index"] == []
    assert sorted(sample["id"] for sample in _samples(out)) == [i for i in range(40) if i % 10]


def test_the_key_map_is_compacted_as_it_grows(tmp_path, monkeypatch):
    """Each run adds one map file; past MAX_FILES the run writes the live map as one file, and runs go on right."""
    from deltalake import DeltaTable, write_deltalake

    from streaming.convert import key_map

    monkeypatch.setattr(key_map, "MAX_FILES", 3)
    table, out = _table(tmp_path, 30), str(tmp_path / "out")
    _run(table, out)
    seen = []
    for step in range(6):
        DeltaTable(table).delete(f"id = {step}")
        write_deltalake(table, pa.table({"id": pa.array([100 + step], pa.int64()), "text": ["n"]}), mode="append")
        _run(table, out)
        seen.append(len(commit_log.read_snapshot(DatasetRoot(out)).metadata["latest"]["files"]))
    assert max(seen) == 3 and 1 in seen[1:], seen
    files = commit_log.read_snapshot(DatasetRoot(out)).metadata["latest"]["files"]
    state = commit_log.read_snapshot(DatasetRoot(out))
    live = key_map.load(DatasetRoot(out), files, state.shards)
    assert live.entries.num_rows == sum(shard["samples"] for shard in state.shards) == 30
    DeltaTable(table).delete("id = 29 OR id = 105")
    _run(table, out)
    assert sorted(sample["id"] for sample in _samples(out)) == list(range(6, 29)) + list(range(100, 105))


def _samples(out: str) -> list[dict]:
    from streaming import LocalDataset

    return list(LocalDataset(out))


def test_a_reader_in_flight_finishes_its_epoch_on_the_version_it_loaded(tmp_path):
    """A training job that loaded the index keeps reading it while a mirror run replaces shards under it; a new
    dataset sees the new version."""
    from deltalake import DeltaTable

    from streaming import StreamingDataset

    table, out = _table(tmp_path, 120), str(tmp_path / "out")
    _run(table, out)
    reader = iter(StreamingDataset(local=out, batch_size=1, shuffle=True, shuffle_seed=7))
    first = [next(reader)["id"] for _ in range(30)]
    DeltaTable(table).delete("id % 3 = 0")
    DeltaTable(table).update(new_values={"text": "changed"}, predicate="id % 3 = 1")
    result = _run(table, out)
    assert result.shards_rewritten >= 10
    rest = [sample["id"] for sample in reader]
    assert sorted(first + rest) == list(range(120))  # the old version, whole, once
    again = StreamingDataset(local=out, batch_size=1)
    seen = {sample["id"]: sample["text"] for sample in again}
    assert sorted(seen) == [i for i in range(120) if i % 3]
    assert {seen[i] for i in seen if i % 3 == 1} == {"changed"}


def _ids(dataset) -> list[int]:
    return [int(sample["id"]) for sample in dataset]


def _checkpoint_after(dataset, samples: int) -> dict:
    """The checkpoint of ``dataset`` after it yielded ``samples`` samples of its first epoch."""
    iterator = iter(dataset)
    for _ in range(samples):
        next(iterator)
    return dataset.state_dict(samples, True)


def test_a_checkpoint_names_the_version_it_was_taken_on_and_resumes_exactly_on_it(tmp_path):
    from streaming import StreamingDataset

    table, out = _table(tmp_path, 120), str(tmp_path / "out")
    _run(table, out)

    def dataset():
        return StreamingDataset(local=out, batch_size=1, shuffle=True, shuffle_seed=7)

    whole = _ids(dataset())
    state = _checkpoint_after(dataset(), 30)
    assert state["epoch"] == 0
    version = state["dataset_version"]
    assert set(version) == {"fingerprint", "epoch_size"} and version["epoch_size"] == 120
    code, inspected, err = run_cli("inspect", out, "--json", "--samples", "0")
    assert code == 0 and inspected["dataset_version"] == version["fingerprint"], err
    resumed = dataset()
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert _ids(resumed) == whole[30:]


def test_a_checkpoint_of_an_older_version_is_refused_mid_epoch_and_remapped_at_an_epoch_boundary(tmp_path):
    """Item 3 of the mirror issue: a checkpoint taken before a mirror run replaced shards is never silently
    shifted: refused mid-epoch (naming both versions and the way out), taken as is at an epoch's start, and
    remapped to the epoch's end when the checkpoint had finished it."""
    from deltalake import DeltaTable

    from streaming import StreamingDataset

    table, out = _table(tmp_path, 120), str(tmp_path / "out")
    _run(table, out)

    def dataset():
        return StreamingDataset(local=out, batch_size=1, shuffle=True, shuffle_seed=7)

    mid, finished = _checkpoint_after(dataset(), 30), _checkpoint_after(dataset(), 120)
    DeltaTable(table).delete("id = 5")
    assert _run(table, out).shards_rewritten == 1
    kept = [i for i in range(120) if i != 5]

    with pytest.raises(ValueError, match="sample 30 of epoch 0 on dataset version") as refused:
        dataset().load_state_dict(mid)
    assert mid["dataset_version"]["fingerprint"] in str(refused.value)
    assert "'sample_in_epoch' set to 0" in str(refused.value)

    restarted = dataset()
    restarted.load_state_dict({**mid, "sample_in_epoch": 0})
    assert sorted(_ids(restarted)) == kept

    remapped = dataset()
    with pytest.warns(UserWarning, match="finished epoch 0"):
        remapped.load_state_dict(finished)
    assert _ids(remapped) == []  # the finished epoch yields nothing more, as on the old version
    assert sorted(_ids(remapped)) == kept  # the next epoch reads the new version


def test_a_checkpoint_without_a_version_on_a_kept_dataset_warns_that_nothing_checked_it(tmp_path):
    from streaming import StreamingDataset

    table, out = _table(tmp_path, 40), str(tmp_path / "out")
    _run(table, out)
    dataset = StreamingDataset(local=out, batch_size=1)
    upstream_keys = {"epoch": 0, "sample_in_epoch": 10, "num_canonical_nodes": 1, "shuffle_seed": 9176}
    with pytest.warns(UserWarning, match="names no dataset version"):
        dataset.load_state_dict(upstream_keys)
    assert len(_ids(dataset)) == 30


class _SparkReaderOnDeltaLake:
    """Spark's reader of the job (`SparkDeltaChanges`) as far as a mirror run uses it, with delta-rs in place of
    Spark's Delta reader (no Delta jars here): every read is a DataFrame of delta-rs's rows, and the new rows are
    written by SparkDeltaChanges.write, a Spark job."""

    reader = "spark"

    def __init__(self, session, table: str, version: int | None) -> None:
        from streaming.incremental.deltalake_reader import DeltaLakeChanges
        from streaming.spark.table_changes import SparkDeltaChanges

        self.arrow = DeltaLakeChanges(table, version)
        self.spark = SparkDeltaChanges(session, table, self.arrow.version)
        self.version = self.arrow.version

    def frames(self, tables):
        from streaming.spark.table_input import frame_from_arrow

        return tuple(frame_from_arrow(self.spark.session, table) for table in tables)

    def column_names(self):
        return self.arrow.column_names()

    def encodings(self, chosen):
        return self.arrow.encodings(chosen)

    def version_rows(self):
        return self.frames([self.arrow.version_rows()])[0]

    def window(self, start):
        return self.arrow.window(start)

    def feed(self, window, columns):
        return self.frames(self.arrow.feed(window, columns))

    def files(self, window, columns):
        return self.frames(self.arrow.files(window, columns))

    def full(self, start, columns):
        return self.frames(self.arrow.full(start, columns))

    row_ids = False
    no_row_ids = "Spark's reader"

    def net_rows(self, plus, minus, encodings):
        return self.spark.net_rows(plus, minus, encodings)

    def key_digests(self, rows, key):
        return self.spark.key_digests(rows, key)

    def with_row_ids(self):
        return None

    def write(self, rows, out, **options):
        return self.spark.write(rows, out, **options)


def test_spark_s_reader_mirrors_through_dataframes(spark, tmp_path, monkeypatch):
    """With Spark's reader the change's keys are digested on the executors and the new rows written by Spark."""
    from deltalake import DeltaTable, write_deltalake

    from streaming.spark import incremental_job
    from streaming.spark.table_changes import SparkChoice

    class SparkChoiceOnDeltaLake(SparkChoice):
        def open(self, table, version):
            return _SparkReaderOnDeltaLake(self.session, table, version)

    monkeypatch.setattr(incremental_job, "choose_reader", lambda session, table: SparkChoiceOnDeltaLake(spark))
    table, out = _table(tmp_path, 40), str(tmp_path / "out")
    assert _run(table, out).samples == 40
    DeltaTable(table).delete("id % 4 = 0")
    DeltaTable(table).update(new_values={"text": "changed"}, predicate="id = 5")
    write_deltalake(table, pa.table({"id": pa.array([900], pa.int64()), "text": ["new"]}), mode="append")
    result = _run(table, out)
    assert (result.removed, result.samples, result.method) == (11, 2, "change_data_feed")
    expected = DeltaTable(table).to_pyarrow_table().to_pylist()
    assert Counter((s["id"], s["text"]) for s in _samples(out)) == Counter((r["id"], r["text"]) for r in expected)
    write_deltalake(table, pa.table({"id": pa.array([7, 7], pa.int64()), "text": ["a", "b"]}), mode="append")
    with pytest.raises(ValueError, match=r"not unique in version 4 .*'id': 7"):
        _run(table, out)
    with pytest.raises(ValueError, match="resync=True with mode='mirror' reads .* with delta-rs only"):
        _run(table, out, resync=True)


def test_a_key_that_is_not_unique_is_refused_naming_duplicates(tmp_path):
    from deltalake import write_deltalake

    table, out = _table(tmp_path, 10), str(tmp_path / "out")
    _run(table, out)
    write_deltalake(table, pa.table({"id": pa.array([4, 77, 77], pa.int64()), "text": ["x", "y", "z"]}), mode="append")
    with pytest.raises(ValueError, match=r"not unique in version 1 .*'id': 4.*'id': 77"):
        _run(table, out)
    assert commit_log.read_snapshot(DatasetRoot(out)).source_versions == {table: 0}


def test_the_first_run_refuses_duplicate_keys(tmp_path):
    from deltalake import write_deltalake

    table = str(tmp_path / "table")
    write_deltalake(table, pa.table({"id": pa.array([1, 1, 2], pa.int64()), "text": ["a", "b", "c"]}))
    with pytest.raises(ValueError, match=r"not unique in version 0.*'id': 1"):
        _run(table, str(tmp_path / "out"))


def test_a_missing_key_says_the_table_has_no_row_ids(tmp_path):
    table = _table(tmp_path, 3)
    with pytest.raises(ValueError, match=r"needs key=\[\.\.\.\].*no Delta row tracking"):
        incremental_to_mds(table, str(tmp_path / "out"), mode="mirror", progress=False)
    with pytest.raises(ValueError, match=r"has no column\(s\) \['nope'\]"):
        incremental_to_mds(table, str(tmp_path / "out"), mode="mirror", key=["nope"], progress=False)
    with pytest.raises(ValueError, match=r"key column\(s\) \['id'\] are not among the dataset's columns"):
        incremental_to_mds(table, str(tmp_path / "out"), mode="mirror", key=["id"], columns=["text"], progress=False)
    assert not (tmp_path / "out").exists(), "a refused run writes nothing"


def test_modes_do_not_mix_on_one_dataset(tmp_path):
    from deltalake import write_deltalake

    table = _table(tmp_path, 3)
    appended, mirrored_out = str(tmp_path / "appended"), str(tmp_path / "mirror")
    incremental_to_mds(table, appended, progress=False)
    _run(table, mirrored_out)
    write_deltalake(table, pa.table({"id": pa.array([9], pa.int64()), "text": ["n"]}), mode="append")
    with pytest.raises(ValueError, match="made in append mode"):
        _run(table, appended)
    with pytest.raises(ValueError, match="is a mirror of"):
        incremental_to_mds(table, mirrored_out, progress=False)
    with pytest.raises(ValueError, match=r"by key \['id'\], not \['text'\]"):
        incremental_to_mds(table, mirrored_out, mode="mirror", key=["text"], progress=False)


def test_vacuum_keeps_replaced_shards_within_its_retention_and_the_key_map(tmp_path):
    from deltalake import DeltaTable

    table, out = _table(tmp_path, 50), str(tmp_path / "out")
    _run(table, out)
    before = {entry["zip_data"]["basename"] for entry in commit_log.read_snapshot(DatasetRoot(out)).shards}
    DeltaTable(table).delete("id < 5")
    result = _run(table, out)
    now = {entry["zip_data"]["basename"] for entry in commit_log.read_snapshot(DatasetRoot(out)).shards}
    replaced = before - now
    assert len(replaced) == result.shards_rewritten >= 1
    record = commit_log.read_snapshot(DatasetRoot(out)).metadata["latest"]
    within = commit_log.referenced_files(DatasetRoot(out), since=0.0)
    assert replaced <= within, "a reader of the previous index would lose shards"
    past = commit_log.referenced_files(DatasetRoot(out), since=float("inf"))
    assert not past & replaced and set(record["files"]) <= past  # past the retention only the state's files stay
    gone = vacuum(out, retention=0, retention_check=False)
    assert replaced <= set(gone.deleted) and not set(gone.deleted) & set(record["files"])
    assert Counter(s["id"] for s in _samples(out)) == Counter(range(5, 50))


def test_the_audit_names_removed_and_replaced_keys_by_digest_and_inspect_shows_it(tmp_path, capsys):
    from deltalake import DeltaTable

    from streaming.cli import main
    from streaming.convert.key_map import key_digests

    table, out = _table(tmp_path, 20), str(tmp_path / "out")
    _run(table, out)
    DeltaTable(table).delete("id = 3")
    DeltaTable(table).update(new_values={"text": "changed"}, predicate="id = 7")
    _run(table, out)
    digest = {
        key: key_digests(pa.table({"id": pa.array([key], pa.int64())}), {"id": "int64"})[0].hex() for key in (3, 7)
    }
    body = json.loads((Path(out) / commit_log.commit_path(2)).read_text())
    assert body["operation"] == "replace"
    assert body["audit"] == {
        "table": table,
        "table_version": 2,
        "key": ["id"],
        "removed": [digest[3]],
        "replaced": [digest[7]],
    }
    assert "changed" not in json.dumps(body["audit"]) and "row 3" not in json.dumps(body)
    assert main(["inspect", out, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["source_versions"] == {table: 2}
    assert shown["audit"][-1]["removed"] == [digest[3]] and shown["audit"][-1]["replaced"] == [digest[7]]
    assert main(["inspect", out]) == 0
    text = capsys.readouterr().out
    assert "table version 2" in text and digest[3] in text


def test_commit_checks_refuse_an_audit_with_values_in_clear():
    from streaming.format.commit_checks import check_commit

    body = {"version": 1, "operation": "replace", "base_version": 0, "add": [], "remove": []}
    check_commit({**body, "audit": {"table_version": 1, "key": ["id"], "removed": ["ab" * 16], "replaced": []}}, 1, "c")
    with pytest.raises(ValueError, match="hex key digests"):
        check_commit(
            {**body, "audit": {"table_version": 1, "key": ["id"], "removed": ["alice"], "replaced": []}}, 1, "c"
        )
    with pytest.raises(ValueError, match="files"):
        check_commit({**body, "record": {"run": "r", "files": ["../outside"]}}, 1, "c")


@pytest.mark.reference
def test_streaming_community_reads_a_mirrored_dataset_as_we_do(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    from tests.differential import operations
    from tests.differential.reference import ReferenceWorker, reference_python

    worker = ReferenceWorker(reference_python())
    try:
        table, out = _table(tmp_path, 60), str(tmp_path / "out")
        _run(table, out)
        DeltaTable(table).delete("id % 7 = 0")
        _run(table, out)
        DeltaTable(table).update(new_values={"text": "u"}, predicate="id > 50")
        write_deltalake(table, pa.table({"id": pa.array([100], pa.int64()), "text": ["new"]}), mode="append")
        _run(table, out)
        theirs, ours = worker.call("read", folder=out), operations.read(out)
        assert "error" not in theirs, theirs
        expected = DeltaTable(table).to_pyarrow_table().to_pylist()
        # The reference shows the NULL masks as columns of their own (`streaming.convert.null_plan`): none is set.
        masks = [value for sample in theirs["samples"] for name, value in sample[1] if name.endswith("__is_null")]
        assert masks and set(masks) == {("numpy", "|u1", b"\x00")}
        values = [
            ("dict", [(n, v) for n, v in sample[1] if not n.endswith("__is_null")]) for sample in theirs["samples"]
        ]
        assert sorted(map(repr, values)) == sorted(map(repr, ours["samples"]))
        assert Counter((s["id"], s["text"]) for s in _samples(out)) == Counter((r["id"], r["text"]) for r in expected)
    finally:
        worker.close()


@pytest.mark.slow  # hypothesis searches until every kind of step was generated: about 20 s
def test_the_keyed_histories_reach_crashes_races_vacuums_and_replaces():
    """The strategy must reach killed runs, races, VACUUM and the table's replacement, or the oracle proves little
    (one search that collects every kind, as generating these histories is what costs)."""
    from hypothesis import find

    wanted = {"Crash", "Race", "ReplaceAsSelect", "Restore", "Merge", "Delete", "Update", "Vacuum"}
    seen: set[str] = set()

    def every_kind_seen(steps) -> bool:
        seen.update(type(step).__name__ for step in steps)
        return wanted <= seen

    find(h.keyed_histories(), every_kind_seen, settings=settings(database=None, max_examples=300))
