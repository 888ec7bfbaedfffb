"""Spark under faults: task attempts that fail at random points of the write, and `dataframe_to_mds` runs racing.

Failing attempts: a ``mapInArrow`` stage in front of our partition writer lets about 20 % of the task attempts
(seeded, at most three per task, so Spark's four attempts of ``local[2,4]`` always suffice) die after a random
number of batches, half of them by raising and half by killing their Python worker (``os._exit``: no cleanup
of any kind runs). The writer has written shards of those attempts by then. The result must equal a clean
run's samples (the frame's rows), and after `vacuum` with zero retention no file may be left that the index does
not name, also when a late copy of a task (what a speculative attempt killed after the commit leaves) wrote
into the run.

Why not ``local-cluster[2,1,1024]`` with ``spark.speculation=true``: it runs here with pip's pyspark (its
package folder serves as ``SPARK_HOME``), but starting its two executor JVMs took 58 to 112 s on this 2-core
machine, and Spark never launches a speculative copy on a host that already runs an attempt of the task; all
executors of ``local-cluster`` are 127.0.0.1, so no copy ever started (a task 8 s slower than its siblings got
none), and in ``local[N]`` the scheduler does not run speculation at all. The late copy is therefore written
the way a speculative attempt writes it, with the task's own `write_attempt`.

Racing runs: 4 appends and 1 overwrite call `dataframe_to_mds` at once from threads sharing the session, into
one local and one S3 dataset. The commit log must hold exactly the runs that reported success, the dataset must
equal replaying them in the log's order, and an overwrite that lost must have failed clearly, leaving no file.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streaming import StreamingDataset, vacuum
from streaming.convert.attempt import TaskConfig, write_attempt
from streaming.format.commit_log import ConcurrentCommitError, commit_path, commit_versions
from streaming.spark import dataframe_to_mds
from streaming.storage.dataset_root import DatasetRoot
from tests.remotes import CREDENTIAL_PREFIXES, Remote
from tests.spark.helpers import assert_no_orphans, files_under, read_samples

FAILURE_RATE = 0.2
#: Spark's ``local[2,4]`` gives a task four attempts: the first three may fail, the fourth never does.
MAX_FAILED_ATTEMPTS = 3
PARTITIONS = 6
BATCHES = 4  # per partition, of 64 rows (the session's maxRecordsPerBatch)
ROWS_PER_PARTITION = BATCHES * 64
#: Fails 2 of the 8 attempts this makes: one raises, one kills its worker, both with 2 of 4 batches written.
SEED = 4
APPENDS = 4
RACE_ROWS = 40


def _failure_plan() -> Callable[[int, int], tuple[bool, int, bool]]:
    """``plan(partition, attempt)``: whether that attempt fails, before which batch, and whether it kills its worker.

    A closure over plain numbers, so that Spark ships it by value: a module-level function would make every
    Python worker import this test module, and with it torch (seconds per worker).
    """
    seed, rate, max_failed, batches = SEED, FAILURE_RATE, MAX_FAILED_ATTEMPTS, BATCHES

    def plan(partition: int, attempt: int) -> tuple[bool, int, bool]:
        chooser = random.Random(seed * 1_000_003 + partition * 101 + attempt)
        fails = attempt < max_failed and chooser.random() < rate
        return fails, chooser.randrange(batches), chooser.random() < 0.5

    return plan


def _flaky_frame(spark: Any, marks: str | None) -> Any:
    """The input frame; with ``marks`` (a folder for one file per attempt), attempts fail as `_failure_plan` says."""
    from pyspark import TaskContext

    plan = _failure_plan()
    frame = spark.range(0, PARTITIONS * ROWS_PER_PARTITION, 1, PARTITIONS).selectExpr(
        "id", "sha2(CAST(id AS STRING), 256) AS digest"
    )

    def passthrough(batches: Iterator[Any]) -> Iterator[Any]:
        context = TaskContext.get()
        partition, attempt = context.partitionId(), context.attemptNumber()
        fails, before, crash = plan(partition, attempt) if marks else (False, 0, False)
        if marks:
            with open(os.path.join(marks, f"{partition}-{attempt}-{'failed' if fails else 'ran'}"), "w"):
                pass
        for number, batch in enumerate(batches):
            if fails and number == before:
                if crash:
                    os._exit(1)  # the Python worker dies mid-task: no finally, no cleanup of any kind
                raise RuntimeError(f"injected failure of partition {partition}, attempt {attempt}")
            yield batch

    return frame.mapInArrow(passthrough, frame.schema)


#: What a clean run of the frame writes, order aside (its rows: computed here rather than by a second conversion).
_CLEAN_ROWS = sorted((i, hashlib.sha256(str(i).encode()).hexdigest()) for i in range(PARTITIONS * ROWS_PER_PARTITION))


def _rows(out: str) -> list[tuple[int, str]]:
    return sorted((int(sample["id"]), sample["digest"]) for sample in read_samples(out))


def _late_copy(out: str, run: str) -> None:
    """What a speculative copy of partition 0 killed after the commit leaves: a complete attempt folder."""
    import pyarrow as pa

    config = TaskConfig(
        destination=out,
        run=run,
        columns={"id": "int64", "digest": "str"},
        compression=None,
        hashes=(),
        size_limit=4096,
        direct=True,
    )
    batch = pa.record_batch({"id": pa.array(range(64), pa.int64()), "digest": pa.array(["x"] * 64)})
    write_attempt(config, iter([batch]), 0, 987_654)


def test_failing_task_attempts_give_a_clean_runs_output_and_vacuum_leaves_no_orphan(spark, tmp_path) -> None:
    marks = tmp_path / "attempts"
    marks.mkdir()
    # Uncompressed: reading a zstd dataset in place leaves its decompressed copies next to the shards.
    options: dict[str, Any] = {"size_limit": "4kb", "compression": None, "progress": False}
    started = time.monotonic()
    out = str(tmp_path / "faulty")
    faulty = dataframe_to_mds(_flaky_frame(spark, str(marks)), out, **options)
    seconds = time.monotonic() - started
    attempts = sorted(os.listdir(marks))
    failed = [name for name in attempts if name.endswith("-failed")]
    crashed = [name for name in failed if _failure_plan()(*map(int, name.split("-")[:2]))[2]]
    assert failed and crashed and len(crashed) < len(failed), "the seed must make attempts both raise and crash"
    assert faulty.samples == len(_CLEAN_ROWS)
    assert _rows(out) == _CLEAN_ROWS

    _late_copy(out, faulty.run)
    assert any("attempt-987654" in path for path in files_under(out))
    vacuum(out, retention=0, retention_check=False)
    assert_no_orphans(out)
    assert _rows(out) == _CLEAN_ROWS
    figures = {"attempts": len(attempts), "failed": len(failed), "worker_crashes": len(crashed)}
    figures |= {"samples": len(_CLEAN_ROWS), "conversion_s": round(seconds, 1)}
    print("spark task-failure figures:", json.dumps(figures))


def _storage_env() -> dict[str, str]:
    """The storage settings the test configured in this process, for the executors (``executor_env``)."""
    extra = ("AWS_EC2_METADATA_DISABLED", "NO_GCE_CHECK")
    return {name: value for name, value in os.environ.items() if name.startswith(CREDENTIAL_PREFIXES) or name in extra}


def _ids(remote: Remote, cache: str) -> list[int]:
    if remote.scheme == "local":
        return [int(sample["id"]) for sample in read_samples(remote.root)]
    return [int(sample["id"]) for sample in StreamingDataset(remote=remote.root, local=cache, batch_size=1)]


def _replay(destination: DatasetRoot, rows: dict[str, list[int]]) -> tuple[list[str], list[int]]:
    """The runs in the commit log's order and the ids that applying them one after the other gives."""
    runs: list[str] = []
    state: list[int] = []
    for version in commit_versions(destination):
        body = json.loads(destination.read_text(commit_path(version)) or "")
        run = body["record"]["run"]
        runs.append(run)
        state = rows[run] if body["operation"] == "overwrite" else state + rows[run]
    return runs, state


@pytest.mark.parametrize("scheme", ["local", "s3"])
def test_four_appends_and_an_overwrite_through_dataframe_to_mds_at_once(
    scheme: str, spark, remote_factory: Callable[[str], Remote], tmp_path
) -> None:
    remote = remote_factory(scheme)
    options: dict[str, Any] = {"compression": None, "size_limit": "1kb", "progress": False}
    if scheme != "local":
        options["executor_env"] = _storage_env()

    def frame(number: int) -> Any:
        return spark.range(number * 1000, number * 1000 + RACE_ROWS, 1, 2).selectExpr("id")

    seed = dataframe_to_mds(frame(0), remote.root, mode="error", **options)
    modes = {number: "append" for number in range(1, APPENDS + 1)} | {APPENDS + 1: "overwrite"}
    start = threading.Barrier(len(modes))
    results: dict[int, Any] = {}

    def run(number: int, mode: str) -> None:
        start.wait()
        try:
            results[number] = dataframe_to_mds(frame(number), remote.root, mode=mode, **options)
        except Exception as err:
            results[number] = err

    threads = [threading.Thread(target=run, args=item) for item in modes.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    lost = {number: error for number, error in results.items() if isinstance(error, Exception)}
    assert set(lost) <= {APPENDS + 1}, f"every append must land: {lost}"
    for error in lost.values():
        assert isinstance(error, ConcurrentCommitError) and "Another writer committed version" in str(error)
    succeeded = {results[number].run: number for number in modes if number not in lost} | {seed.run: 0}
    rows = {run: list(range(number * 1000, number * 1000 + RACE_ROWS)) for run, number in succeeded.items()}
    destination = DatasetRoot(remote.root)
    order, expected = _replay(destination, rows)
    assert sorted(order) == sorted(succeeded), "the log must hold exactly the runs that reported success"
    assert order[0] == seed.run
    assert Counter(_ids(remote, str(tmp_path / "cache"))) == Counter(expected)
    folders = {path.split("/")[0] for path in destination.list_relative("")} - {"_mds_log"}
    overwrote = APPENDS + 1 not in lost
    kept_runs = set(order[order.index(results[APPENDS + 1].run) :]) if overwrote else set(order)
    assert folders - {"index.json", "mds_conversion.json"} == kept_runs, "only committed runs' files remain"
    print(f"dataframe_to_mds race figures ({scheme}):", json.dumps({"runs": len(modes), "lost": len(lost)}))
