"""Eight tasks writing 64 MiB shards at once to a workspace that enforces the Files API's limits.

The fake workspace answers 429 past 10 requests in flight or 100 a second, and its presigned URLs (another server,
as cloud storage is) expire now and then and fail a part now and then. The conversion runs in its own Spark
application with eight task slots and no task retries (`throttled_conversion.py`), so it succeeds only if no task
ever fails. It must: the package keeps every process within the machine's budget for the workspace (the server
refuses nothing), and recovers from what cloud storage does as the SDK allows (a new URL for an expired one, a part
sent again, and when the SDK gives up the whole shard sent again). Every sample is then read from the files the
server stored: each id exactly once, with its bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import DATABRICKS_TOKEN, Service
from tests.spark.throttled_conversion import payload

pytestmark = [pytest.mark.spark, pytest.mark.services]

SCRIPT = Path(__file__).with_name("throttled_conversion.py")
PARTITIONS = 8
ROWS = 33  # 66 MiB a task: one 64 MiB shard (multipart in the newest SDK) and a small one


def control(service: Service, path: str, **values: int) -> dict:
    query = "&".join(f"{name}={value}" for name, value in values.items())
    request = urllib.request.Request(f"{service.endpoint}/fake/{path}?{query}", b"" if values else None)
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())


@pytest.fixture
def faulty_workspace(fake_databricks: Service) -> Iterator[Service]:
    """The service's limits (counters reset) and cloud storage that expires every 11th URL use and fails every 23rd
    part with a 500; both switched off afterwards."""
    control(fake_databricks, "limits", max_concurrent=10, max_per_second=100)
    control(fake_databricks, "storage", expire_every=11, fail_every=23, fail_status=500)
    yield fake_databricks
    control(fake_databricks, "storage", expire_every=0, fail_every=0)


def test_eight_tasks_write_64_mib_shards_within_the_limits_and_through_storage_faults(faulty_workspace, tmp_path):
    folder = f"/Volumes/main/default/vol/throttled-{uuid.uuid4().hex[:8]}"
    environment = {name: value for name, value in os.environ.items() if not name.startswith("DATABRICKS_")}
    environment.update(
        DATABRICKS_HOST=faulty_workspace.endpoint,
        DATABRICKS_TOKEN=DATABRICKS_TOKEN,
        DATABRICKS_CONFIG_FILE=str(tmp_path / "missing-databrickscfg"),
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
        TMPDIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, str(SCRIPT), f"dbfs:{folder}", str(PARTITIONS), str(ROWS)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["samples"] == PARTITIONS * ROWS and result["shards"] == 2 * PARTITIONS

    limits = control(faulty_workspace, "limits")
    assert limits["refused"] == 0, f"the workspace answered {limits['refused']} requests with 429"
    # The fake counts a request until its handler thread, after sending the last byte, takes the workspace lock
    # again; by then the client may have read that answer, released its lease and started the next request, so under
    # load the fake sees one request more than the eight leases the machine hands out.
    assert limits["most_in_flight"] <= 8 + 1, limits
    faults = control(faulty_workspace, "storage")
    if faults["parts"]:  # the SDK sends large shards to presigned URLs (databricks-sdk >= 0.69's default client)
        assert faults["expired"] and faults["failed"], f"no URL expired or no part failed: {faults}"

    from streaming import StreamingDataset

    stored = Path(faulty_workspace.extra["root"]) / folder.lstrip("/")
    shards = sorted(stored.rglob("shard.*.mds"))
    assert len(shards) == 2 * PARTITIONS and max(path.stat().st_size for path in shards) > 60 << 20
    dataset = StreamingDataset(local=str(stored), shuffle=False, batch_size=1)
    seen = [int(sample["id"]) for sample in dataset]
    assert sorted(seen) == list(range(PARTITIONS * ROWS)), "a sample is missing or duplicated"
    for index in range(0, len(dataset), 7):
        sample = dataset[index]
        assert sample["data"] == payload(int(sample["id"])), f"sample {sample['id']} came back changed"


class _Executors:
    """A session whose executors run on the given hosts (Spark's status tracker, as the count reads it)."""

    def __init__(self, *hosts: str) -> None:
        infos = [type("Info", (), {"host": lambda self, h=host: h})() for host in hosts]
        tracker = type("Tracker", (), {"getExecutorInfos": lambda self: infos})()
        status = type("Status", (), {"_jtracker": tracker})()
        self.sparkContext = type("Context", (), {"statusTracker": lambda self: status})()


class _ConnectSession:
    @property
    def sparkContext(self) -> None:
        raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")


def test_tasks_learn_how_many_machines_share_the_workspace_budget(spark):
    from streaming.spark.workspace_share import executor_machines, task_environment
    from streaming.storage.workspace_budget import MACHINES_ENV

    assert executor_machines(spark) == 1  # local mode: the driver's machine runs every task
    assert task_environment(spark.range(1), None) == {}
    assert task_environment(spark.range(1), {"S3_ENDPOINT_URL": "x"}) == {"S3_ENDPOINT_URL": "x"}
    assert executor_machines(_Executors("driver", "worker-1", "worker-1", "worker-2")) == 3
    assert executor_machines(_ConnectSession()) == 1
    frame = type("Frame", (), {"sparkSession": _Executors("driver", "worker-1")})()
    assert task_environment(frame, None) == {MACHINES_ENV: "2"}
    assert task_environment(frame, {MACHINES_ENV: "5"}) == {MACHINES_ENV: "5"}  # executor_env wins
