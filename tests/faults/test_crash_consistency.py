"""Crash consistency of a commit: leftovers of a crashed run, a checkpoint behind its log, and vacuum.

A run killed before it commits leaves files in its own folder only: they are not dataset content (a retry
with ``mode="error"`` is not refused), and `vacuum` removes them once older than the retention, never a
file a commit names, nor a newer one. A crash between a commit and its ``index.json`` checkpoint leaves a
stale index that the next writer repairs, with the metadata of the same commit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from streaming import vacuum
from streaming.convert.attempt import Attempt
from streaming.convert.commit import check_destination, publish
from streaming.format.commit_log import read_snapshot
from streaming.storage.dataset_root import DatasetRoot


def _entry(name: str) -> dict:
    return {
        "column_encodings": ["int64"],
        "column_names": ["id"],
        "column_sizes": [8],
        "compression": None,
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": name, "bytes": 64, "hashes": {}},  # room for its count, offsets and sample
        "samples": 1,
        "size_limit": 1024,
        "version": 2,
        "zip_data": None,
    }


def _attempt(root: str, run: str) -> Attempt:
    folder = f"{run}/part-00000-attempt-0"
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    with open(os.path.join(root, folder, "shard.00000.mds"), "w") as file:
        file.write("x")
    return Attempt(0, 0, folder, [_entry("shard.00000.mds")], 1, 1, 0)


def _age(path: str, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_a_crashed_runs_folder_is_no_content_and_vacuum_removes_only_old_leftovers(tmp_path):
    root = str(tmp_path / "ds")
    crashed = _attempt(root, "20260101T000000Z-aaaaaa")  # a run killed before its commit
    destination = DatasetRoot(root)
    base = check_destination(destination, "error")  # its folder does not make the destination non-empty
    publish(destination, "20260101T000100Z-bbbbbb", [_attempt(root, "20260101T000100Z-bbbbbb")], "error", base=base)
    fresh = _attempt(root, "20260101T000200Z-cccccc")  # a writer still in flight
    for folder, _, names in os.walk(root):
        for name in names:
            _age(os.path.join(folder, name), 3600)
    _age(os.path.join(root, fresh.directory, "shard.00000.mds"), 0)
    result = vacuum(root, retention="30m", retention_check=False)
    assert result.deleted == [f"{crashed.directory}/shard.00000.mds"]
    assert result.kept_recent == [f"{fresh.directory}/shard.00000.mds"]
    assert read_snapshot(destination).shards[0]["raw_data"]["basename"].startswith("20260101T000100Z-bbbbbb/")
    assert os.path.exists(os.path.join(root, "_mds_log", f"{1:020d}.json"))


def test_a_stale_checkpoint_is_repaired_by_the_next_commit_with_its_metadata(tmp_path):
    root = str(tmp_path / "ds")
    destination = DatasetRoot(root)
    publish(destination, "first", [_attempt(root, "first")], "error", metadata={"run": "first"})
    stale_index = open(os.path.join(root, "index.json")).read()
    publish(destination, "second", [_attempt(root, "second")], "append", metadata={"run": "second"})
    with open(os.path.join(root, "index.json"), "w") as file:  # as if the second run died before its checkpoint
        file.write(stale_index)
    publish(destination, "third", [_attempt(root, "third")], "append", metadata={"run": "third"})
    index = json.load(open(os.path.join(root, "index.json")))
    assert [e["raw_data"]["basename"].split("/")[0] for e in index["shards"]] == ["first", "second", "third"]
    metadata = json.load(open(os.path.join(root, "mds_conversion.json")))
    assert [run["run"] for run in metadata["runs"]] == ["first", "second", "third"]


_KILLED_WRITER = """
import sys, time
from streaming.convert.attempt import Attempt
from streaming.convert.commit import publish
from streaming.storage.dataset_root import DatasetRoot
from streaming.format.mds.writer import MDSWriter
import json, os
root, run = sys.argv[1], sys.argv[2]
print("ready", flush=True)
folder = f"{run}/part-00000-attempt-0"
with MDSWriter(out=os.path.join(root, folder), columns={"id": "int64"}, compression=None, size_limit=1024) as writer:
    for i in range(400):
        writer.write({"id": i})
with open(os.path.join(root, folder, "index.json")) as file:
    shards = json.load(file)["shards"]
publish(DatasetRoot(root), run, [Attempt(0, 0, folder, shards, 400, 0, 0)], "append", metadata={"run": run})
"""


def test_writers_killed_at_random_points_leave_a_dataset_the_next_run_extends(tmp_path):
    import random

    from streaming import LocalDataset

    root = str(tmp_path / "ds")
    chooser = random.Random(7)
    committed, killed, duration = 0, 0, 0.0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for number in range(6):
        run = f"20260101T0000{number:02d}Z-{number:06x}"
        writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, root, run], env=env, stdout=subprocess.PIPE)
        assert writer.stdout is not None and writer.stdout.readline() == b"ready\n"
        started = time.monotonic()
        if number == 0:  # the first run is timed, so that the kills fall anywhere in writing and committing
            writer.wait()
            duration = time.monotonic() - started
        time.sleep(chooser.uniform(0.0, 1.2 * duration))
        if writer.poll() is None:
            os.kill(writer.pid, signal.SIGKILL)
            killed += 1
        writer.wait()
        committed = sum(entry["samples"] for entry in read_snapshot(DatasetRoot(root)).shards) // 400
        if os.path.exists(os.path.join(root, "index.json")):
            ids = [int(sample["id"]) for sample in LocalDataset(root)]
            assert ids == list(range(400)) * (len(ids) // 400), "the index names only complete runs"
    final = subprocess.run([sys.executable, "-c", _KILLED_WRITER, root, "20260101T010000Z-ffffff"], env=env)
    assert final.returncode == 0
    ids = [int(sample["id"]) for sample in LocalDataset(root)]
    assert ids == list(range(400)) * (committed + 1)
    assert killed > 0
    vacuum(root, retention=0, retention_check=False)
    left = {os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names}
    named = {e["raw_data"]["basename"] for e in read_snapshot(DatasetRoot(root)).shards}
    assert {name for name in left if not name.endswith("index.json")} - named - {"mds_conversion.json"} == {
        name for name in left if name.startswith("_mds_log/") and not name.endswith("index.json")
    }, "after vacuum only the dataset's own files remain (no temp file of a killed writer)"
    print("kill figures:", json.dumps({"writers": 6, "killed": killed, "committed_before_final": committed}))
