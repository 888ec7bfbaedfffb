"""SIGKILL at random points of a CLI conversion, of an upload to S3, and of DataLoader workers.

Conversions (``mds-streaming convert --mode append``, 2 worker processes) into a local folder and into the S3
server are killed, process group and all, at random points of a run (the first run is timed, so the kills fall
anywhere in reading, writing, uploading and committing). After every kill the dataset is whole copies of the
source (a killed run either committed or left nothing that counts); the next run in the same directories
appends cleanly; after `vacuum` with zero retention every file left is one the dataset names, and the killed
runs left nothing in the temporary directory.

DataLoader workers: a training process over a `StreamingDataset` (2 workers) kills one of its workers mid-epoch;
once the epoch fails (however PyTorch reports it) the process is SIGKILLed with its other worker; the next run with the
same cache and coordination directory (``STREAMING_STATE_DIR`` on ``/dev/shm``) reads every sample exactly once
and correctly, and once it exits, the state directory holds what a run without kills leaves (the cache folder's two lock
files, which the next run reuses): the killed processes' state files, shared-memory blocks and locks (all of
the package's live in that directory) are gone, and the cache holds no temporary or partial file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

from streaming import MDSWriter, StreamingDataset, vacuum
from streaming.format.commit_log import LOG_FOLDER, read_snapshot
from streaming.format.index import INDEX_BASENAME, METADATA_BASENAME, shard_files
from streaming.storage.dataset_root import DatasetRoot
from tests.remotes import Remote

FILES = 3
ROWS_PER_FILE = 400
KILLS = 2
LOADER_SAMPLES = 1200


def _source(folder: str) -> list[int]:
    """Parquet files of ids and texts; returns the ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(folder)
    for number in range(FILES):
        ids = list(range(number * ROWS_PER_FILE, (number + 1) * ROWS_PER_FILE))
        table = pa.table({"id": pa.array(ids, pa.int64()), "text": [f"row {i} " + "y" * (i % 40) for i in ids]})
        pq.write_table(table, os.path.join(folder, f"part-{number}.parquet"))
    return list(range(FILES * ROWS_PER_FILE))


def _dataset_ids(remote: Remote, cache: str) -> list[int]:
    dataset = StreamingDataset(remote=remote.root, local=cache, batch_size=1, shuffle=False)
    return [int(sample["id"]) for sample in dataset]


def _described(folder) -> list[str]:
    """Each entry of ``folder``: its kind, size and first bytes (or its own entries), to tell what left it."""
    described = []
    for entry in sorted(os.scandir(folder), key=lambda item: item.name):
        if entry.is_dir(follow_symlinks=False):
            described.append(f"{entry.name}/ holding {sorted(os.listdir(entry.path))[:10]}")
        else:
            with open(entry.path, "rb") as file:
                described.append(f"{entry.name} ({entry.stat().st_size} bytes: {file.read(64)!r})")
    return described


def _committed_copies(destination: DatasetRoot, rows: int) -> int:
    samples = sum(entry["samples"] for entry in read_snapshot(destination).shards)
    assert samples % rows == 0, f"the dataset holds {samples} samples: not whole runs of {rows}"
    return samples // rows


@pytest.mark.parametrize("scheme", ["local", "s3"])
def test_conversions_killed_at_random_points_leave_a_dataset_the_next_run_extends(
    scheme: str, remote_factory: Callable[[str], Remote], tmp_path
) -> None:
    remote = remote_factory(scheme)
    ids = _source(str(tmp_path / "src"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(scratch)}
    command = [sys.executable, "-m", "streaming", "convert", str(tmp_path / "src"), remote.root, "--quiet"]
    command += ["--mode", "append", "--workers", "2", "--compression", "none", "--size-limit", "4kb"]
    destination = DatasetRoot(remote.root)
    chooser = random.Random(3)
    killed = 0
    started = time.monotonic()
    assert subprocess.run(command, env=env, stdout=subprocess.DEVNULL).returncode == 0
    duration = time.monotonic() - started
    runs = 0
    while killed < KILLS and runs < 4 * KILLS:
        run = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        time.sleep(chooser.uniform(0.2, 1.0) * duration)
        runs += 1
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            killed += 1
        else:
            duration /= 2  # the first, timed run was slower (cold imports): aim earlier, a completed run counts too
        run.wait()
        _committed_copies(destination, len(ids))
    copies = _committed_copies(destination, len(ids))
    assert subprocess.run(command, env=env, stdout=subprocess.DEVNULL).returncode == 0
    assert Counter(_dataset_ids(remote, str(tmp_path / "cache"))) == Counter(ids * (copies + 1))
    assert killed == KILLS

    vacuum(remote.root, retention=0, retention_check=False)
    named = {info["basename"] for entry in read_snapshot(destination).shards for _, info in shard_files(entry)}
    folders = {name.rsplit("/", 1)[0] for name in named}
    left = set(destination.list_relative(""))
    own = {INDEX_BASENAME, METADATA_BASENAME} | {f"{folder}/{INDEX_BASENAME}" for folder in folders}
    assert {name for name in left if not name.startswith(f"{LOG_FOLDER}/")} - own == named
    assert sorted(os.listdir(scratch)) == [], f"killed runs left temporary files behind: {_described(scratch)}"
    figures = {
        "runs": runs + 2,
        "killed": killed,
        "committed": copies + 1,
        "samples_verified": len(ids) * (copies + 1),
    }
    print(f"conversion kill figures ({scheme}):", json.dumps(figures))


_TRAINER = """
import json, os, signal, sys
from torch.utils.data import DataLoader
from streaming import StreamingDataset
remote, cache, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
dataset = StreamingDataset(remote=remote, local=cache, batch_size=8, shuffle=False)
loader = DataLoader(dataset, batch_size=8, num_workers=2)
ids, epoch = [], iter(loader)
try:
    for number, batch in enumerate(epoch):
        ids.extend(batch["id"].tolist())
        if number == at:
            os.kill(epoch._workers[0].pid, signal.SIGKILL)
except Exception as error:  # PyTorch's RuntimeError, or the ConnectionResetError of a half-sent batch
    # PyTorch's SIGCHLD handler raises again at any bytecode while a worker is dead, this clause included:
    # retry until the kill lands (the training process dies too, its other worker with it).
    while True:
        try:
            os.write(2, f"epoch failed: {type(error).__name__}\\n".encode())
            os.killpg(0, signal.SIGKILL)
        except Exception:
            pass
print(json.dumps(ids))
"""


def _payload(i: int) -> bytes:
    return np.random.default_rng(i).bytes(64 + i % 200)


def test_dataloader_workers_killed_mid_epoch_leave_nothing_and_the_next_epoch_is_whole(tmp_path) -> None:
    data = str(tmp_path / "data")
    with MDSWriter(out=data, columns={"id": "int64", "payload": "bytes"}, compression="zstd", size_limit=6_000) as w:
        for i in range(LOADER_SAMPLES):
            w.write({"id": i, "payload": _payload(i)})
    state = f"/dev/shm/mds-faults-{uuid.uuid4().hex[:12]}"
    cache = str(tmp_path / "cache")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "STREAMING_STATE_DIR": state}
    chooser = random.Random(5)
    batches = LOADER_SAMPLES // 8
    try:
        killed = subprocess.run(
            [sys.executable, "-c", _TRAINER, data, cache, str(chooser.randrange(5, batches // 2))],
            env=env,
            capture_output=True,
            text=True,
            start_new_session=True,
        )
        assert killed.returncode == -signal.SIGKILL and "epoch failed:" in killed.stderr, killed.stderr[-2000:]
        whole = subprocess.run(
            [sys.executable, "-c", _TRAINER, data, cache, "-1"], env=env, capture_output=True, text=True
        )
        assert whole.returncode == 0, whole.stderr[-2000:]
        ids = json.loads(whole.stdout)
        assert ids == list(range(LOADER_SAMPLES)), "the next epoch must yield every sample once, in order"
        # What any run leaves: the cache folder's two lock files, reused by the next run (nothing of a dead one).
        left = sorted(os.listdir(state))
        assert [name.split("-")[0] for name in left] == ["local", "shards"], f"left in {state}: {left}"
        cached = {name for folder, _, names in os.walk(cache) for name in names}
        assert all(".tmp" not in name and ".part" not in name for name in cached), sorted(cached)
        dataset = StreamingDataset(remote=data, local=cache, batch_size=1, shuffle=False)
        assert all(bytes(dataset[i]["payload"]) == _payload(i) for i in range(0, LOADER_SAMPLES, 37))
        print("dataloader kill figures:", json.dumps({"kills": 3, "samples_verified": len(ids)}))
    finally:
        subprocess.run(["rm", "-rf", state], check=False)
