"""What the executors of each kind of Databricks compute can reach, through `run_local.compute_mode`.

Each mode gives the driver what Databricks shows a driver of that compute and the executors only what that compute
gives them (classic: the machine's storage credentials, no workspace token; standard: neither; serverless: neither,
and no network). For every destination kind the driver either refuses it before any Spark job starts, naming
`/Volumes` and the mode, or the conversion succeeds there. And a task of that mode writing to what the driver
refuses does fail, where the test process's own executors succeed: the refusals match what the tasks would meet.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from streaming.spark import dataframe_to_mds
from streaming.spark.executor_access import CLASSIC, OFF_DATABRICKS, SERVERLESS, STANDARD, access_mode
from tests.notebooks.conftest import Volume
from tests.remotes import CREDENTIAL_PREFIXES
from tests.services import DATABRICKS_TOKEN, Service

pytestmark = [pytest.mark.spark, pytest.mark.services]

ROWS = 60
MODE_NAMES = {"local": OFF_DATABRICKS, "classic": CLASSIC, "standard": STANDARD, "serverless": SERVERLESS}
# (mode, destination, what executor_env carries): refused on the driver ...
REFUSED = [
    ("classic", "dbfs", None),
    ("standard", "dbfs", None),
    ("serverless", "dbfs", "workspace"),
    ("standard", "s3", None),
    ("serverless", "s3", "storage"),
    ("standard", "local", None),
    ("serverless", "local", None),
    ("classic", "files_api", None),
    ("serverless", "files_api", "workspace"),
]
# ... and converted.
# ... and converted (every mode also runs a notebook on a mounted volume: test_notebooks.py).
ALLOWED = [
    ("serverless", "mounted", None),
    ("classic", "s3", None),
    ("standard", "s3", "storage"),
    ("classic", "dbfs", "workspace"),
]


@pytest.fixture
def workspace(fake_databricks: Service, monkeypatch: pytest.MonkeyPatch) -> Service:
    """The driver holds the fake workspace's credentials, as a notebook's context does."""
    monkeypatch.setenv("DATABRICKS_HOST", fake_databricks.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", DATABRICKS_TOKEN)
    return fake_databricks


def storage_env() -> dict[str, str]:
    """The storage settings and credentials the test configured in this process."""
    extra = ("STORAGE_EMULATOR_HOST", "AWS_EC2_METADATA_DISABLED")
    prefixes = tuple(prefix for prefix in CREDENTIAL_PREFIXES if prefix != "DATABRICKS_")
    return {name: value for name, value in os.environ.items() if name.startswith(prefixes) or name in extra}


@pytest.fixture
def destination(request, workspace: Service, remote_factory: Callable, tmp_path: Path) -> Callable[[str], str]:
    """A fresh `out` of each kind: a mounted volume, an unmounted one (Files API), DBFS, S3, a local folder."""

    def make(kind: str) -> str:
        unique = uuid.uuid4().hex[:8]
        if kind == "mounted":
            volume: Volume = request.getfixturevalue("mounted_volume")
            return volume.path(f"modes-{unique}")
        if kind == "files_api":
            return request.getfixturevalue("files_api_volume").path(f"modes-{unique}")
        if kind == "dbfs":
            return f"dbfs:/tmp/modes-{unique}"
        if kind == "s3":
            return remote_factory("s3").root
        return str(tmp_path / f"modes-{unique}")

    return make


def executor_env(kind: str | None, workspace: Service) -> dict[str, str] | None:
    if kind == "workspace":
        return {"DATABRICKS_HOST": workspace.endpoint, "DATABRICKS_TOKEN": DATABRICKS_TOKEN}
    return storage_env() if kind == "storage" else None


@pytest.mark.parametrize("mode", list(MODE_NAMES))
def test_the_driver_sees_what_databricks_shows_it(runner, spark, mode):
    with runner.compute_mode(spark, mode):
        assert access_mode(spark) == MODE_NAMES[mode]
        assert access_mode() == MODE_NAMES[mode]  # from the active session
    assert access_mode(spark) == OFF_DATABRICKS


@pytest.mark.parametrize("mode, kind, carried", REFUSED)
def test_a_destination_the_executors_cannot_reach_is_refused_before_any_job(
    runner, spark, workspace, destination, mode, kind, carried
):
    out = destination(kind)
    group = f"refused-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(group, "must stay empty")
    try:
        with runner.compute_mode(spark, mode), pytest.raises(ValueError) as caught:
            dataframe_to_mds(
                spark.range(0, ROWS, 1, 2), out, progress=False, executor_env=executor_env(carried, workspace)
            )
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    message = str(caught.value)
    assert out in message and "/Volumes/" in message and MODE_NAMES[mode] in message, message
    assert DATABRICKS_TOKEN not in message and "testing-secret" not in message
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []


@pytest.mark.parametrize("mode, kind, carried", ALLOWED)
def test_a_destination_the_executors_can_reach_is_written(runner, spark, workspace, destination, mode, kind, carried):
    out = destination(kind)
    with runner.compute_mode(spark, mode):
        result = dataframe_to_mds(
            spark.range(0, ROWS, 1, 2), out, progress=False, executor_env=executor_env(carried, workspace)
        )
    assert result.samples == ROWS and result.shards == 2


def reach_from_a_task(spark, out: str) -> str:
    """What one Spark task meets when it writes a file below `out` through the storage layer, as a conversion's task
    does: "reached", or the error (one attempt: boto3's own retries off, so the test waits for no backoff)."""
    import pyarrow as pa

    def probe(batches):
        for _ in batches:
            pass
        os.environ["AWS_MAX_ATTEMPTS"] = "1"
        from streaming.storage import join_url, storage_for

        with tempfile.NamedTemporaryFile() as file:
            try:
                url = join_url(out, "probe.bin")
                storage_for(url).put(file.name, url)
                result = "reached"
            except Exception as error:  # the test reads it
                result = f"{type(error).__name__}: {error}"
        yield pa.RecordBatch.from_pylist([{"result": result}])

    return spark.range(1, numPartitions=1).mapInArrow(probe, "result string").collect()[0]["result"]


@pytest.mark.parametrize(
    "mode, kind, failure",
    [
        ("classic", "dbfs", "default auth"),  # no workspace token on the executors
        ("standard", "s3", "credentials"),  # the cluster's storage credentials are hidden from tasks
        ("serverless", "s3", "cannot reach"),  # no network at all
    ],
)
def test_what_the_driver_refuses_fails_in_the_tasks_of_that_mode(
    runner, spark, workspace, destination, mode, kind, failure
):
    out = destination(kind)
    with runner.compute_mode(spark, "local"):
        assert reach_from_a_task(spark, out) == "reached"  # this machine's own executors can
    with runner.compute_mode(spark, mode):
        met = reach_from_a_task(spark, out)
    assert met != "reached" and failure in met, met
