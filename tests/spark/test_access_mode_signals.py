"""The access mode is read from every signal a Databricks driver gives; an unreadable one gets the strictest checks.

A real local Spark session (and a Spark Connect one) stands in for a cluster's driver: the runtime's environment
variables are set, and the settings Databricks puts on a cluster (the `dataSecurityMode` tag, table ACLs, Python
process isolation) are set on the session as the cluster would have them, or left out.
"""

from __future__ import annotations

import pytest

from streaming.spark import dataframe_to_mds
from streaming.spark.executor_access import (
    ACCESS_MODE_ENV,
    CLASSIC,
    SECURITY_MODE_TAG,
    SERVERLESS,
    STANDARD,
    UNKNOWN,
    access_mode,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def on_a_cluster(monkeypatch: pytest.MonkeyPatch, spark):
    """The driver of a Databricks cluster (DBR 15.4) whose Spark settings the test chooses; restored afterwards."""
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    for name in (ACCESS_MODE_ENV, "IS_SERVERLESS"):
        monkeypatch.delenv(name, raising=False)
    touched: list[str] = []

    def settings(**values: str) -> None:
        for key, value in values.items():
            spark.conf.set(key, value)
            touched.append(key)

    yield settings
    for key in touched:
        spark.conf.unset(key)


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({SECURITY_MODE_TAG: "SINGLE_USER"}, CLASSIC),
        ({SECURITY_MODE_TAG: "USER_ISOLATION"}, STANDARD),
        ({"spark.databricks.acl.dfAclsEnabled": "true"}, STANDARD),
        ({"spark.databricks.pyspark.enableProcessIsolation": "true"}, STANDARD),
        # A sandbox setting outweighs a tag that says otherwise: the tasks are sandboxed whatever the tag.
        ({SECURITY_MODE_TAG: "SINGLE_USER", "spark.databricks.acl.sqlOnly": "true"}, STANDARD),
        ({}, UNKNOWN),
        ({SECURITY_MODE_TAG: "SOMETHING_NEW"}, UNKNOWN),
    ],
)
def test_each_signal_of_the_cluster_is_read(spark, on_a_cluster, settings, expected):
    on_a_cluster(**settings)
    assert access_mode(spark) == expected


def test_a_spark_connect_session_on_a_cluster_is_standard_access(connect, monkeypatch):
    """Standard access gives a notebook a Spark Connect session, which has no sparkContext."""
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    monkeypatch.delenv(ACCESS_MODE_ENV, raising=False)
    monkeypatch.delenv("IS_SERVERLESS", raising=False)
    assert access_mode(connect) == STANDARD


def test_an_unreadable_mode_gets_the_strictest_checks_and_says_how_to_state_it(spark, on_a_cluster, tmp_path):
    """No tag: a local folder (each sandboxed task's own disk under standard access or serverless) is refused."""
    out = str(tmp_path / "unknown")
    with pytest.raises(ValueError) as caught:
        dataframe_to_mds(spark.range(0, 10, 1, 1), out, progress=False)
    message = str(caught.value)
    assert out in message and "/Volumes/" in message
    assert f"{ACCESS_MODE_ENV}=classic" in message and SECURITY_MODE_TAG in message


def test_a_stated_mode_wins(spark, on_a_cluster, monkeypatch, tmp_path):
    monkeypatch.setenv(ACCESS_MODE_ENV, "serverless")
    assert access_mode(spark) == SERVERLESS
    monkeypatch.setenv(ACCESS_MODE_ENV, "Classic")
    assert access_mode(spark) == CLASSIC
    out = str(tmp_path / "stated")
    dataframe_to_mds(spark.range(0, 10, 1, 1), out, progress=False)
    assert (tmp_path / "stated" / "index.json").is_file()
    monkeypatch.setenv(ACCESS_MODE_ENV, "shared-ish")
    with pytest.raises(ValueError, match=f"{ACCESS_MODE_ENV}='shared-ish': state one of classic, standard, serverless"):
        access_mode(spark)
