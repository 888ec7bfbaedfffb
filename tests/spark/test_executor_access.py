"""`dbfs:/` outside `/Volumes` is refused on the driver, before any task starts, unless the executors get credentials.

On a Databricks cluster only the driver holds workspace credentials; here the driver process has them (as a notebook
does) and the executors would not, so the conversion must stop before Spark runs a job, naming the ways out.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from streaming.spark import dataframe_to_mds, incremental_to_mds
from tests.services import DATABRICKS_TOKEN, Service

pytestmark = [pytest.mark.spark, pytest.mark.services]


@pytest.fixture
def driver_credentials(fake_databricks: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Service:
    monkeypatch.setenv("DATABRICKS_HOST", fake_databricks.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", DATABRICKS_TOKEN)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "missing-databrickscfg"))
    return fake_databricks


def requests_below(service: Service, folder: str) -> list[dict]:
    lines = Path(service.extra["request_log"]).read_text().splitlines()
    return [e for e in map(json.loads, lines) if folder in e["path"] or folder in json.dumps(e["query"])]


def assert_refusal(err: pytest.ExceptionInfo, url: str) -> None:
    message = str(err.value)
    assert url in message and "/Volumes/" in message and "executor_env" in message
    assert DATABRICKS_TOKEN not in message


@pytest.mark.parametrize("executor_env", [None, {"DATABRICKS_HOST": "http://127.0.0.1:9"}])
def test_dbfs_without_executor_credentials_is_refused_before_any_job(spark, driver_credentials, executor_env):
    folder = f"/tmp/refused-{uuid.uuid4().hex[:8]}"
    url = f"dbfs:{folder}"
    group = f"dbfs-refusal-{uuid.uuid4().hex[:8]}"
    spark.sparkContext.setJobGroup(group, "must stay empty")
    try:
        with pytest.raises(ValueError) as caught:
            dataframe_to_mds(spark.range(0, 50, 1, 2), url, progress=False, executor_env=executor_env)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert_refusal(caught, url)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(group) == []
    assert requests_below(driver_credentials, folder) == []


def test_incremental_into_dbfs_is_refused_before_reading_the_table(spark, driver_credentials):
    url = f"dbfs:/tmp/refused-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ValueError) as caught:
        incremental_to_mds("main.sales.no_such_table", url, spark=spark, progress=False)
    assert_refusal(caught, url)
