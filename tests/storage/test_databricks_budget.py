"""The per-workspace request budget: one budget for every process of the machine, kept against the fake workspace's
limits (10 in flight, 100 a second, as the real Files API's), with throttled answers pausing the whole machine.

The budget's own checks run several processes against one budget; the workspace checks count, on the server, the
most requests it saw in flight and the 429s it answered: none through the package, many from raw SDK clients
sending the same load (so the server's limits are real and the load exceeds them).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.storage import storage_for
from streaming.storage.databricks_transport import retry_after
from streaming.storage.workspace_budget import (
    CONCURRENCY_ENV,
    MACHINES_ENV,
    RATE_ENV,
    Share,
    WorkspaceBudget,
    budget_for,
)
from tests.services import DATABRICKS_TOKEN, Service

HOST = "https://budget-test.cloud.databricks.com"
SPAWN = multiprocessing.get_context("spawn")


def _hold_leases(host: str, share: Share, threads: int, rounds: int, hold: float, log: str) -> None:
    """In a fresh process: `threads` threads take `rounds` leases each, writing (enter, leave) times to `log`."""
    budget = WorkspaceBudget(host, share)
    lines: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(rounds):
            with budget.request():
                entered = time.monotonic()
                time.sleep(hold)
                left = time.monotonic()
            with lock:
                lines.append(f"{entered} {left}\n")

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    with open(log, "a", encoding="utf-8") as file:
        file.writelines(lines)


def _run_processes(host: str, share: Share, tmp_path: Path, processes: int, **work: float) -> list[tuple[float, float]]:
    log = tmp_path / f"leases-{uuid.uuid4().hex[:6]}.txt"
    children = [
        SPAWN.Process(target=_hold_leases, args=(host, share, work["threads"], work["rounds"], work["hold"], str(log)))
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    return [tuple(map(float, line.split())) for line in log.read_text().splitlines()]


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    current = most = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def test_processes_share_one_concurrency_limit(tmp_path):
    spans = _run_processes(
        f"{HOST}/{uuid.uuid4().hex}", Share(3, 1000.0), tmp_path, processes=3, threads=4, rounds=4, hold=0.02
    )
    assert len(spans) == 48
    assert _most_at_once(spans) == 3  # reached, never exceeded, across 3 processes of 4 threads


def test_processes_share_one_rate(tmp_path):
    started = time.monotonic()
    spans = _run_processes(
        f"{HOST}/{uuid.uuid4().hex}", Share(8, 50.0), tmp_path, processes=2, threads=3, rounds=5, hold=0
    )
    starts = sorted(start for start, _ in spans)
    assert len(starts) == 30
    # Start times are booked 1/50 s apart; a thread that wakes late may start close to the next one, so the check
    # is on every run of ten: ten requests take at least a fifth of a second (less scheduling slack).
    spans_of_ten = [later - earlier for earlier, later in zip(starts, starts[10:])]
    assert min(spans_of_ten) >= 0.2 - 0.05, f"ten requests started within {min(spans_of_ten):.3f} s at 50 a second"
    assert starts[-1] - max(started, starts[0]) >= 29 * 0.02 - 0.01


def _pause_then_report(host: str, pause: float, report: str) -> None:
    WorkspaceBudget(host, Share(2, 100.0)).pause(pause)
    Path(report).write_text(str(time.monotonic() + pause))  # the pause ends no earlier than this


def test_a_throttled_answer_pauses_every_process_of_the_machine(tmp_path):
    host = f"{HOST}/{uuid.uuid4().hex}"
    report = tmp_path / "paused-until"
    child = SPAWN.Process(target=_pause_then_report, args=(host, 2.0, str(report)))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    with WorkspaceBudget(host, Share(2, 100.0)).request():
        granted = time.monotonic()
    assert float(report.read_text()) - 0.01 <= granted <= float(report.read_text()) + 0.5


def _hold_every_slot(host: str, ready: str) -> None:
    budget = WorkspaceBudget(host, Share(2, 100.0))
    budget.lease()
    budget.lease()
    Path(ready).touch()
    time.sleep(60)


def test_a_killed_process_frees_its_slots(tmp_path):
    host = f"{HOST}/{uuid.uuid4().hex}"
    ready = tmp_path / "holding"
    child = SPAWN.Process(target=_hold_every_slot, args=(host, str(ready)))
    child.start()
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        budget = WorkspaceBudget(host, Share(2, 100.0))
        got: list[float] = []
        waiter = threading.Thread(target=lambda: (budget.lease(), got.append(time.monotonic())))
        waiter.start()
        time.sleep(0.3)
        assert not got, "a slot was granted while another process held both"
        killed = time.monotonic()
        os.kill(child.pid, signal.SIGKILL)
        waiter.join(10)
        assert got and got[0] >= killed
    finally:
        child.kill()
        child.join(10)


def test_the_share_divides_the_workspace_budget_among_machines(monkeypatch):
    assert Share.from_env() == Share(8, 80.0)
    monkeypatch.setenv(CONCURRENCY_ENV, "10")
    monkeypatch.setenv(RATE_ENV, "100")
    monkeypatch.setenv(MACHINES_ENV, "4")
    assert Share.from_env() == Share(2, 25.0)
    monkeypatch.setenv(MACHINES_ENV, "40")
    assert Share.from_env() == Share(1, 2.5)
    monkeypatch.setenv(CONCURRENCY_ENV, "0")
    with pytest.raises(ValueError, match=CONCURRENCY_ENV):
        Share.from_env()


def test_retry_after_reads_seconds_and_dates():
    assert retry_after("3", 429) == 3.0
    assert retry_after(None, 429) == 1.0 and retry_after(None, 503) == 0.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 5))
    assert 3.0 < retry_after(date, 503) <= 5.0


# -- against the fake workspace -----------------------------------------------------------------------------------


@pytest.fixture
def workspace(fake_databricks: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Service]:
    """The fake workspace's credentials, its limits at the service's (10, 100/s) and its counters reset."""
    for name in list(os.environ):
        if name.startswith("DATABRICKS_") or name.startswith("MDS_STREAMING_DATABRICKS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATABRICKS_HOST", fake_databricks.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", DATABRICKS_TOKEN)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "missing-databrickscfg"))
    limits(fake_databricks, max_concurrent=10, max_per_second=100)
    yield fake_databricks
    limits(fake_databricks, max_concurrent=10, max_per_second=100)


def limits(service: Service, **values: int) -> dict:
    """Set (with values) or read the fake workspace's limits and counters (`most_in_flight`, `refused`)."""
    query = "&".join(f"{name}={value}" for name, value in values.items())
    request = urllib.request.Request(f"{service.endpoint}/fake/limits?{query}", b"" if values else None)
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())


def _metadata_burst(url: str, threads: int, rounds: int, raw_client: object | None) -> None:
    """`threads` threads each asking for `url`'s metadata `rounds` times: through the package, or a raw SDK client."""
    storage = storage_for(url)
    path = url.removeprefix("dbfs:")

    def work() -> None:
        for _ in range(rounds):
            if raw_client is None:
                assert storage.exists(url)
            else:
                raw_client.files.get_metadata(path)  # type: ignore[attr-defined]

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def _burst_in_process(url: str, threads: int, rounds: int) -> None:
    _metadata_burst(url, threads, rounds, None)


def test_processes_writing_to_one_workspace_stay_within_its_limits(workspace, tmp_path):
    url = f"dbfs:/Volumes/main/default/vol/budget-{uuid.uuid4().hex[:8]}/blob.bin"
    (tmp_path / "blob.bin").write_bytes(b"x" * 1000)
    storage_for(url).put(str(tmp_path / "blob.bin"), url)
    limits(workspace, max_concurrent=10, max_per_second=100)
    started = time.monotonic()
    children = [SPAWN.Process(target=_burst_in_process, args=(url, 4, 12))]
    for child in children:
        child.start()
    _metadata_burst(url, 4, 12, None)
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    elapsed = time.monotonic() - started
    seen = limits(workspace)
    assert seen["refused"] == 0, seen
    assert seen["most_in_flight"] <= 8, seen
    assert elapsed >= 96 / 80 - 0.1  # 96 requests at 80 a second, from two processes


def test_the_same_load_from_raw_sdk_clients_is_throttled(workspace, tmp_path):
    from databricks.sdk import WorkspaceClient

    url = f"dbfs:/Volumes/main/default/vol/budget-{uuid.uuid4().hex[:8]}/blob.bin"
    (tmp_path / "blob.bin").write_bytes(b"x" * 1000)
    storage_for(url).put(str(tmp_path / "blob.bin"), url)
    limits(workspace, max_concurrent=10, max_per_second=100)
    client = WorkspaceClient(host=workspace.endpoint, token=DATABRICKS_TOKEN)
    _metadata_burst(url, 24, 12, client)
    assert limits(workspace)["refused"] > 0, "the fake workspace refused nothing: its limits are not enforced"


def test_a_throttled_workspace_pauses_the_machine_for_its_retry_after(workspace, tmp_path):
    url = f"dbfs:/Volumes/main/default/vol/budget-{uuid.uuid4().hex[:8]}/blob.bin"
    (tmp_path / "blob.bin").write_bytes(b"x" * 1000)
    storage_for(url).put(str(tmp_path / "blob.bin"), url)
    limits(workspace, max_concurrent=10, max_per_second=4)  # far below the package's 80 a second
    before = len(Path(workspace.extra["request_log"]).read_text().splitlines())
    _metadata_burst(url, 4, 5, None)
    lines = Path(workspace.extra["request_log"]).read_text().splitlines()[before:]
    entries = [e for e in map(json.loads, lines) if e["server"] == "workspace" and e["path"].startswith("/api/")]
    refused = [e for e in entries if e["status"] == 429]
    assert refused, "the workspace throttled nothing; the test proves nothing"
    # After a 429 (Retry-After: 1) the machine starts nothing for a second: only requests already on their way
    # (at most the budget's 8 in flight) arrive within it.
    for answer in refused:
        soon = [e for e in entries if answer["time"] < e["time"] < answer["time"] + 0.9]
        assert len(soon) <= 8, f"{len(soon)} requests within 0.9 s of a 429"
    assert len(refused) <= len(entries) // 2


def test_budget_for_shares_one_budget_per_workspace_and_share(monkeypatch):
    first = budget_for(f"{HOST}/same")
    assert budget_for(f"{HOST}/same") is first
    monkeypatch.setenv(MACHINES_ENV, "2")
    assert budget_for(f"{HOST}/same") is not first and budget_for(f"{HOST}/same").share == Share(4, 40.0)


def test_a_training_runs_nodes_divide_the_budget_among_them(monkeypatch):
    """WORLD_SIZE / LOCAL_WORLD_SIZE nodes, as every rank and DataLoader worker of a training run has them."""
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert Share.from_env() == Share(2, 20.0)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert Share.from_env() == Share(1, 5.0)  # one rank a node unless told, as StreamingDataset assumes
    monkeypatch.setenv(MACHINES_ENV, "2")  # a conversion's own count wins
    assert Share.from_env() == Share(4, 40.0)


TRAINING_RANK = """
import sys
from streaming import StreamingDataset
dataset = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], batch_size=1, shuffle=False)
print(sum(1 for _ in dataset))
"""


def _train_on_nodes(url: str, tmp_path: Path, nodes: int, label: str, extra: dict[str, str]) -> list[int]:
    """`nodes` training nodes of one rank each (own cache, own budget folder: own machines) reading `url`."""
    ranks = []
    for node in range(nodes):
        home = tmp_path / f"{label}-node{node}"
        environment = {
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "WORLD_SIZE": str(nodes),
            "LOCAL_WORLD_SIZE": "1",
            "RANK": str(node),
            "LOCAL_RANK": "0",
            "STREAMING_STATE_DIR": str(home / "state"),
            **extra,
        }
        environment.pop("MASTER_ADDR", None)
        command = [sys.executable, "-c", TRAINING_RANK, url, str(home / "cache")]
        ranks.append(subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    counts = []
    for rank in ranks:
        out, err = rank.communicate(timeout=240)
        assert rank.returncode == 0, err.decode()[-3000:]
        counts.append(int(out.split()[-1]))
    return counts


def test_training_nodes_reading_a_volume_stay_within_the_workspaces_limits(workspace, monkeypatch, tmp_path):
    """Three nodes download one shard a sample from a workspace whose limits the budget is told (3 in flight, 24 a
    second, under the fake's 3 and 30): each node taking the whole budget is throttled, their shares are not."""
    from streaming import MDSWriter

    local = tmp_path / "dataset"
    with MDSWriter(out=str(local), columns={"id": "int", "pad": "bytes"}, size_limit=300) as writer:
        for index in range(60):
            writer.write({"id": index, "pad": bytes(200)})
    url = f"dbfs:/Volumes/main/default/vol/training-{uuid.uuid4().hex[:8]}"
    storage = storage_for(url)
    for path in sorted(local.iterdir()):
        storage.put(str(path), f"{url}/{path.name}")
    monkeypatch.setenv(CONCURRENCY_ENV, "3")
    monkeypatch.setenv(RATE_ENV, "24")

    limits(workspace, max_concurrent=3, max_per_second=30)
    assert _train_on_nodes(url, tmp_path, 3, "whole", {MACHINES_ENV: "1"}) == [20, 20, 20]
    whole = limits(workspace)
    assert whole["refused"] > 0, f"three nodes at the whole budget were not throttled: the test proves nothing {whole}"

    limits(workspace, max_concurrent=3, max_per_second=30)
    assert _train_on_nodes(url, tmp_path, 3, "shared", {}) == [20, 20, 20]
    shared = limits(workspace)
    assert shared["refused"] == 0, shared
