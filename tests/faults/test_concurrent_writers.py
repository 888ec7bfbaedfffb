"""Concurrent writers on every store: 4 appends and 1 overwrite commit at once, repeated.

Each run uploads its own shard, then commits through `streaming.convert.commit.publish` (the driver's commit
of `dataframe_to_mds`) from the state it read before it started. Afterwards the commit log must be a
serial history of exactly the runs that reported success, the index must be its newest state, every file
it names must exist, and a run that lost must have failed with a clear error and left no file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import pytest

from streaming.convert.attempt import Attempt
from streaming.convert.commit import publish
from streaming.format.commit_log import ConcurrentCommitError, commit_path, commit_versions, read_snapshot
from streaming.format.index import INDEX_BASENAME, parse_index, shard_files
from streaming.format.mds.writer import MDSWriter
from streaming.storage.dataset_root import DatasetRoot
from tests.remotes import Remote

#: "fuse" is `/Volumes/...` on the FUSE mount with a volume's limits (no `link()`: the commit files are created with
#: ``O_EXCL``); "dbfs" is `dbfs:/` outside `/Volumes` through the DBFS API's create-only ``overwrite=false``.
STORES = ["local", "s3", "gs", "azure", "oci", "volumes", "dbfs", "fuse"]
ROUNDS = 2
APPENDS = 4


def _shard(run: str, value: int, scratch: str) -> tuple[str, dict[str, Any]]:
    """A one-sample MDS shard written locally for ``run``: (local file, its index entry)."""
    folder = os.path.join(scratch, run)
    with MDSWriter(out=folder, columns={"value": "int64"}, compression=None) as writer:
        writer.write({"value": value})
    with open(os.path.join(folder, INDEX_BASENAME), encoding="utf-8") as file:
        (entry,) = json.load(file)["shards"]
    return os.path.join(folder, entry["raw_data"]["basename"]), entry


def _run(destination: DatasetRoot, run: str, mode: str, value: int, scratch: str, start: threading.Barrier) -> Any:
    base = read_snapshot(destination)  # what dataframe_to_mds's check_destination reads before the job
    local, entry = _shard(run, value, scratch)
    directory = f"{run}/part-00000-attempt-0"
    destination.storage.put(local, destination.child(f"{directory}/{entry['raw_data']['basename']}"))
    start.wait()
    try:
        publish(destination, run, [Attempt(0, 0, directory, [entry], 1, 1, 0)], mode, metadata={"run": run}, base=base)
    except ConcurrentCommitError as err:
        return err
    return None


def _names(shards: list[dict[str, Any]]) -> list[str]:
    return [info["basename"] for entry in shards for _, info in shard_files(entry)]


def _check_history(destination: DatasetRoot, succeeded: dict[str, str]) -> list[dict[str, Any]]:
    """Replay the log: each commit applies its run to the previous state; return the final shards."""
    state: list[dict[str, Any]] = []
    committed = []
    for version in commit_versions(destination):
        body = json.loads(destination.read_text(commit_path(version)) or "")
        run = body["record"]["run"]
        committed.append(run)
        assert all(entry["raw_data"]["basename"].startswith(f"{run}/") for entry in body["add"]), (
            f"commit {version} ({run}) adds shards of another run"
        )
        assert body["base_version"] == version - 1, f"commit {version} ({run}) was not made on commit {version - 1}"
        state = body["add"] if body["operation"] == "overwrite" else state + body["add"]
    assert sorted(committed[1:]) == sorted(succeeded), "the log must hold exactly the runs that reported success"
    return state


@pytest.mark.parametrize("scheme", STORES)
def test_four_appends_and_an_overwrite_at_once(scheme: str, remote_factory: Callable[[str], Remote]) -> None:
    remote = remote_factory(scheme)
    outcomes = {"append": 0, "overwrite": 0, "lost": 0}
    for round_number in range(ROUNDS):
        destination = DatasetRoot(remote.url(f"round{round_number}"))
        with tempfile.TemporaryDirectory() as scratch:
            seed = threading.Barrier(1)
            assert _run(destination, "seed", "error", -1, scratch, seed) is None
            start = threading.Barrier(APPENDS + 1)
            modes = {f"append{n}": "append" for n in range(APPENDS)} | {"overwrite": "overwrite"}
            results: dict[str, Any] = {}

            def work(run: str, mode: str, value: int, results: dict = results, start=start, at=destination) -> None:
                results[run] = _run(at, run, mode, value, scratch, start)

            threads = [
                threading.Thread(target=work, args=(run, mode, n)) for n, (run, mode) in enumerate(modes.items())
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        succeeded = {run: modes[run] for run, error in results.items() if error is None}
        assert all(modes[run] == "append" for run in succeeded) or "overwrite" in succeeded
        assert all(f"append{n}" in succeeded for n in range(APPENDS)), "every append must land"
        for run, error in results.items():
            if error is not None:
                outcomes["lost"] += 1
                assert run == "overwrite" and "Another writer committed version" in str(error)
                assert destination.list_relative(run) == [], "a run that lost must leave no file"
            else:
                outcomes[modes[run]] += 1
        final = _check_history(destination, succeeded)
        index = parse_index(destination.read_text(INDEX_BASENAME) or "", destination.child(INDEX_BASENAME))
        assert index == final == read_snapshot(destination).shards
        for name in _names(final):
            assert destination.storage.exists(destination.child(name)), f"the index names a missing file {name}"
        assert ("seed/part-00000-attempt-0/shard.00000.mds" in _names(final)) != ("overwrite" in succeeded)
    assert outcomes["append"] == ROUNDS * APPENDS
    print(f"concurrent-writer figures ({scheme}):", outcomes)
