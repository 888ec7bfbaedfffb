"""The commit log stays bounded and readable for years of runs (`streaming.format.commit_log`).

Commits record what changed, a checkpoint of the whole state is written every `CHECKPOINT_INTERVAL` commits, a
reader needs only the newest checkpoint and the commits after it, and ``vacuum`` removes the older log files once
they are past the retention. A commit file left empty or cut short by a killed writer is void after
`TORN_COMMIT_WAIT` and never blocks the next writer. Logs written before checkpoints existed still read.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from streaming.format import commit_log
from streaming.format.commit_log import (
    CHECKPOINT_INTERVAL,
    LOG_FOLDER,
    RUNS_KEPT,
    checkpoint_path,
    commit,
    commit_path,
    publish_checkpoint,
    read_snapshot,
)
from streaming.format.vacuum import vacuum
from streaming.storage.dataset_root import DatasetRoot
from tests.helpers import one_sample_shard


def _append(root: DatasetRoot, number: int, **kwargs) -> commit_log.Snapshot:
    (Path(root.url) / f"s{number}.mds").write_bytes(b"x" * 16)
    state = commit(root, commit_log.APPEND, [one_sample_shard(f"s{number}.mds")], base=read_snapshot(root), **kwargs)
    publish_checkpoint(root, state)
    return state


def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_a_checkpoint_every_interval_and_readers_need_only_the_newest_one(tmp_path):
    root = DatasetRoot(str(tmp_path))
    for number in range(1, 2 * CHECKPOINT_INTERVAL + 6):
        _append(root, number, record={"run": f"r{number}"}, source_versions={"events": number})
    log = tmp_path / LOG_FOLDER
    assert sorted(p.name for p in log.glob("*.checkpoint.json.gz")) == [
        Path(checkpoint_path(CHECKPOINT_INTERVAL)).name,
        Path(checkpoint_path(2 * CHECKPOINT_INTERVAL)).name,
    ]
    state = read_snapshot(root)
    body = json.loads((tmp_path / commit_path(state.version)).read_text())
    assert "shards" not in body and [s["raw_data"]["basename"] for s in body["add"]] == [f"s{state.version}.mds"]
    for version in range(1, 2 * CHECKPOINT_INTERVAL + 1):  # everything before the newest checkpoint, gone
        (tmp_path / commit_path(version)).unlink()
    (tmp_path / checkpoint_path(CHECKPOINT_INTERVAL)).unlink()
    again = read_snapshot(root)
    assert again == state
    assert [s["raw_data"]["basename"] for s in again.shards] == [f"s{n}.mds" for n in range(1, state.version + 1)]
    assert again.source_versions == {"events": state.version} and again.metadata["latest"]["run"] == f"r{state.version}"


def test_vacuum_removes_log_files_older_than_the_newest_checkpoint_past_the_retention(tmp_path):
    root = DatasetRoot(str(tmp_path))
    for number in range(1, CHECKPOINT_INTERVAL + 4):
        _append(root, number)
    log = tmp_path / LOG_FOLDER
    for path in log.iterdir():
        _age(path, 3600)
    result = vacuum(str(tmp_path), retention=60, retention_check=False)
    left = sorted(p.name for p in log.iterdir() if p.name != "index.json")  # the log folder's empty index stays
    assert (log / "index.json").exists()
    assert left == [Path(checkpoint_path(CHECKPOINT_INTERVAL)).name] + [
        Path(commit_path(v)).name for v in range(CHECKPOINT_INTERVAL + 1, CHECKPOINT_INTERVAL + 4)
    ]
    assert all(name.startswith(f"{LOG_FOLDER}/") for name in result.deleted)
    assert read_snapshot(root).version == CHECKPOINT_INTERVAL + 3
    assert len(read_snapshot(root).shards) == CHECKPOINT_INTERVAL + 3


def test_vacuum_keeps_log_files_inside_the_retention(tmp_path):
    root = DatasetRoot(str(tmp_path))
    for number in range(1, CHECKPOINT_INTERVAL + 2):
        _append(root, number)
    vacuum(str(tmp_path), retention=3600, retention_check=False)
    assert (tmp_path / commit_path(1)).exists(), "a commit inside the retention stays"


def test_the_state_keeps_the_newest_run_records_only(tmp_path):
    root = DatasetRoot(str(tmp_path))
    state = read_snapshot(root)
    for number in range(RUNS_KEPT + 5):
        state = commit(root, commit_log.APPEND, [], base=state, record={"run": f"r{number}"})
    assert len(state.metadata["runs"]) == RUNS_KEPT
    assert state.metadata["runs"][-1]["run"] == f"r{RUNS_KEPT + 4}" == state.metadata["latest"]["run"]
    assert read_snapshot(root) == state


def test_an_overwrite_drops_the_source_versions_an_append_keeps_them(tmp_path):
    root = DatasetRoot(str(tmp_path))
    state = commit(root, commit_log.APPEND, [], base=read_snapshot(root), source_versions={"a": 3})
    state = commit(root, commit_log.APPEND, [], base=state, source_versions={"b": 1})
    assert state.source_versions == {"a": 3, "b": 1}
    state = commit(root, commit_log.OVERWRITE, [one_sample_shard("x.mds")], base=state)
    assert read_snapshot(root).source_versions == {} == state.source_versions


@pytest.mark.parametrize("torn", [b"", b'{"log_format": 2, "version": '])
def test_a_commit_file_a_killed_writer_left_empty_or_cut_short_never_blocks_writers(tmp_path, torn, monkeypatch):
    monkeypatch.setattr(commit_log, "TORN_COMMIT_WAIT", 2.0)
    root = DatasetRoot(str(tmp_path))
    _append(root, 1)
    dead = tmp_path / commit_path(2)
    dead.write_bytes(torn)  # what an O_EXCL create leaves when the writer dies before its bytes land
    _age(dead, 10)
    state = _append(root, 3)
    assert state.version == 3
    assert [s["raw_data"]["basename"] for s in read_snapshot(root).shards] == ["s1.mds", "s3.mds"]


def test_a_commit_file_still_being_written_is_waited_for(tmp_path, monkeypatch):
    import threading

    monkeypatch.setattr(commit_log, "TORN_COMMIT_WAIT", 5.0)
    root = DatasetRoot(str(tmp_path))
    _append(root, 1)
    base = read_snapshot(root)
    body = {
        "log_format": 2,
        "version": 2,
        "operation": "append",
        "base_version": 1,
        "add": [one_sample_shard("late.mds")],
        "remove": [],
        "record": None,
        "source_versions": {},
        "committed_at": time.time(),
    }
    target = tmp_path / commit_path(2)
    target.write_bytes(b"")  # claimed, bytes still on their way
    timer = threading.Timer(0.5, lambda: target.write_text(json.dumps(body)))
    timer.start()
    try:
        state = read_snapshot(root)
    finally:
        timer.join()
    assert state.version == 2 and [s["raw_data"]["basename"] for s in state.shards] == ["s1.mds", "late.mds"]
    assert base.version == 1


def test_a_log_written_before_checkpoints_existed_still_reads_and_grows(tmp_path):
    root = DatasetRoot(str(tmp_path))
    log = tmp_path / LOG_FOLDER
    log.mkdir()
    for version in (1, 2):  # the older format: every commit holds the whole state
        shards = [one_sample_shard(f"old{n}.mds") for n in range(1, version + 1)]
        body = {
            "version": version,
            "operation": "append",
            "base_version": version - 1,
            "added": [],
            "removed": [],
            "shards": shards,
            "metadata": {"latest": {"run": f"old{version}"}},
            "committed_at": 0,
        }
        (tmp_path / commit_path(version)).write_text(json.dumps(body))
    state = read_snapshot(root)
    assert state.version == 2 and len(state.shards) == 2 and state.metadata["latest"]["run"] == "old2"
    state = _append(root, 3)
    assert [s["raw_data"]["basename"] for s in read_snapshot(root).shards] == ["old1.mds", "old2.mds", "s3.mds"]
    (tmp_path / commit_path(1)).unlink()  # a whole-state commit is a checkpoint: older ones are not needed
    assert read_snapshot(root) == state


def test_a_missing_commit_between_the_checkpoint_and_the_newest_is_named(tmp_path):
    root = DatasetRoot(str(tmp_path))
    for number in range(1, 4):
        _append(root, number)
    (tmp_path / commit_path(2)).unlink()
    with pytest.raises(commit_log.LogDamagedError, match=r"no commit _mds_log/0+2\.json"):
        read_snapshot(root)


def test_a_replace_drops_the_shards_it_names_and_keeps_the_rest_of_the_state(tmp_path):
    """A mirror run's commit: the named shards leave, the copies go to the end, runs and versions carry on; a
    reader inside the retention keeps the removed files, the newest record's files are kept, and the audit is read
    back from the commit files."""
    root = DatasetRoot(str(tmp_path))
    for number in range(3):
        _append(root, number, record={"run": f"r{number}"}, source_versions={"t": number})
    audit = {"table": "t", "table_version": 3, "key": ["id"], "removed": ["ab" * 16], "replaced": []}
    record = {"run": "m", "mode": "mirror", "files": ["_mds_keys/m.parquet"]}
    state = commit(
        root,
        commit_log.REPLACE,
        [one_sample_shard("copy.mds")],
        base=read_snapshot(root),
        record=record,
        source_versions={"t": 3},
        removed=["s1.mds"],
        audit=audit,
    )
    assert [shard["raw_data"]["basename"] for shard in state.shards] == ["s0.mds", "s2.mds", "copy.mds"]
    assert [run["run"] for run in state.metadata["runs"]] == ["r0", "r1", "r2", "m"]
    assert state.source_versions == {"t": 3}
    assert read_snapshot(root).shards == state.shards
    within = commit_log.referenced_files(root, since=0.0)
    assert {"s1.mds", "_mds_keys/m.parquet"} <= within
    past = commit_log.referenced_files(root, since=float("inf"))
    assert "s1.mds" not in past and "_mds_keys/m.parquet" in past
    assert [entry["table_version"] for entry in commit_log.recent_audits(root, 5)] == [3]
    body = json.loads((tmp_path / commit_path(4)).read_text())
    assert body["operation"] == "replace" and body["remove"] == ["s1.mds"] and "audit" not in body["record"]


def test_a_replace_that_loses_the_race_is_not_put_on_top(tmp_path):
    root = DatasetRoot(str(tmp_path))
    base = _append(root, 0)
    _append(root, 1)
    seen = []
    with pytest.raises(commit_log.ConcurrentCommitError, match="Another writer committed version 2"):
        commit(root, commit_log.REPLACE, [], base=base, removed=["s0.mds"], check=seen.append)
    assert [state.version for state in seen] == [2] and len(read_snapshot(root).shards) == 2


def test_an_overwrite_after_the_newest_checkpoint_is_read_without_it(tmp_path):
    """The state after an overwrite owes nothing to the checkpoint before it, so that checkpoint is not read
    (nor bounded by the smaller dataset the overwrite left): the state reads even with it gone or damaged."""
    root = DatasetRoot(str(tmp_path))
    for number in range(1, CHECKPOINT_INTERVAL + 2):
        _append(root, number)
    (tmp_path / "fresh.mds").write_bytes(b"x" * 16)
    state = commit(root, commit_log.OVERWRITE, [one_sample_shard("fresh.mds")], base=read_snapshot(root))
    publish_checkpoint(root, state)
    (tmp_path / checkpoint_path(CHECKPOINT_INTERVAL)).write_bytes(b"not gzip")
    for version in range(1, CHECKPOINT_INTERVAL + 2):
        (tmp_path / commit_path(version)).unlink()
    again = read_snapshot(root)
    assert again == state and [s["raw_data"]["basename"] for s in again.shards] == ["fresh.mds"]
