"""The access mode is read from every signal a Databricks driver gives; an unreadable one gets the strictest checks.

A real local Spark session (and a Spark Connect one) stands in for a cluster's driver: the runtime's environment
variables are set, and the settings Databricks puts on a cluster (the `dataSecurityMode` tag, table ACLs, Python
process isolation) are set on the session as the cluster would have them, or left out. Databricks Connect from a
laptop is a Spark Connect client of the local server that sends the headers Databricks' client sends (a serverless
session id, or a cluster id), with no runtime variable set; the same client without them is a plain Spark Connect
server's, off Databricks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from streaming.spark import dataframe_to_mds
from streaming.spark.access_mode import (
    ACCESS_MODE_ENV,
    CLASSIC,
    CLUSTER_HEADER,
    OFF_DATABRICKS,
    RUNTIME_TAG,
    SECURITY_MODE_TAG,
    SERVERLESS,
    SESSION_HEADER,
    STANDARD,
    TAG_MODES,
    UNKNOWN,
    Compute,
    access_mode,
    detect,
)
from streaming.spark.executor_access import check_executor_access

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


# Every `data_security_mode` the Clusters API documents (databricks-sdk's compute.DataSecurityMode, the Jobs API's
# copy of it), with the UI's short names.
DOCUMENTED_TAGS = {
    "DATA_SECURITY_MODE_AUTO",
    "DATA_SECURITY_MODE_STANDARD",
    "DATA_SECURITY_MODE_DEDICATED",
    "USER_ISOLATION",
    "SINGLE_USER",
    "NONE",
    "LEGACY_TABLE_ACL",
    "LEGACY_PASSTHROUGH",
    "LEGACY_SINGLE_USER",
    "LEGACY_SINGLE_USER_STANDARD",
}


def test_every_documented_tag_value_has_a_mode():
    assert DOCUMENTED_TAGS - {"DATA_SECURITY_MODE_AUTO"} <= set(TAG_MODES)
    assert TAG_MODES["LEGACY_SINGLE_USER_STANDARD"] == CLASSIC and TAG_MODES["LEGACY_PASSTHROUGH"] == STANDARD


@pytest.mark.parametrize(
    "tag, expected",
    [
        ("DATA_SECURITY_MODE_STANDARD", STANDARD),
        ("DATA_SECURITY_MODE_DEDICATED", CLASSIC),
        ("LEGACY_SINGLE_USER_STANDARD", CLASSIC),
        ("LEGACY_SINGLE_USER", CLASSIC),
        ("LEGACY_PASSTHROUGH", STANDARD),
        ("LEGACY_TABLE_ACL", STANDARD),
        ("NONE", CLASSIC),
        ("data_security_mode_dedicated", CLASSIC),
    ],
)
def test_each_tag_value_is_read_on_a_cluster(spark, on_a_cluster, tag, expected):
    on_a_cluster(**{SECURITY_MODE_TAG: tag})
    assert access_mode(spark) == expected


@pytest.mark.parametrize(
    "runtime, expected",
    [
        ("15.4.x-scala2.12", STANDARD),
        ("16.4.x-photon-scala2.12", STANDARD),
        ("15.4.x-cpu-ml-scala2.12", CLASSIC),
        ("15.4.x-gpu-ml-scala2.12", CLASSIC),
        ("13.3.x-scala2.12", CLASSIC),
        ("14.3.x-scala2.12", STANDARD),
        ("not-a-version", UNKNOWN),
    ],
)
def test_auto_is_what_databricks_chose_for_the_runtime(spark, on_a_cluster, runtime, expected):
    """Auto: standard, but dedicated on an ML or GPU runtime or one before 14.3 (Databricks' compute docs)."""
    on_a_cluster(**{SECURITY_MODE_TAG: "DATA_SECURITY_MODE_AUTO", RUNTIME_TAG: runtime})
    assert access_mode(spark) == expected


@pytest.fixture
def laptop(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Databricks runtime variable, and no stated mode: a laptop or CI machine."""
    for name in ("DATABRICKS_RUNTIME_VERSION", "IS_SERVERLESS", ACCESS_MODE_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def databricks_connect(connect_server, laptop) -> Iterator:
    """Open a Spark Connect client session of the local server sending `headers`, as Databricks Connect's does."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    opened = []

    def open_session(**headers: str):
        params = "".join(f";{name}={value}" for name, value in headers.items())
        session = RemoteSparkSession.builder.remote(f"{connect_server.url}/{params}").create()
        opened.append(session)
        return session

    yield open_session
    for session in opened:
        session.stop()


def test_a_local_spark_or_plain_spark_connect_server_is_off_databricks(session, laptop, tmp_path):
    assert detect(session) == Compute(OFF_DATABRICKS)
    check_executor_access(str(tmp_path / "out"), None, session)


def test_databricks_connect_to_serverless_is_read_from_the_session(databricks_connect, tmp_path):
    session = databricks_connect(**{SESSION_HEADER: str(uuid.uuid4())})
    assert detect(session) == Compute(SERVERLESS, remote_client=True)
    # The laptop's disk is no task's: refused before any job, naming Databricks Connect and /Volumes.
    out = str(tmp_path / "laptop-folder")
    with pytest.raises(ValueError) as caught:
        dataframe_to_mds(session.range(0, 10, 1, 1), out, progress=False)
    message = str(caught.value)
    assert message.startswith(f"{out}: On {SERVERLESS} from a Databricks Connect client, ")
    assert "/Volumes/" in message and not (tmp_path / "laptop-folder").exists()
    # A volume the laptop does not mount is the nodes' mount for the tasks: accepted (the driver commits through
    # the Files API). Cloud storage is not, from serverless tasks without internet.
    check_executor_access("/Volumes/main/default/vol/ds", None, session)
    with pytest.raises(ValueError, match="cannot access the internet"):
        check_executor_access("s3://bucket/ds", None, session)


@pytest.mark.parametrize(
    "tag, expected", [("SINGLE_USER", CLASSIC), ("USER_ISOLATION", STANDARD), ("DATA_SECURITY_MODE_AUTO", STANDARD)]
)
def test_databricks_connect_to_a_cluster_reads_the_clusters_tags(databricks_connect, tag, expected):
    """The cluster's tags answer the session's conf reads, as on the cluster; Connect alone does not mean standard."""
    session = databricks_connect(**{CLUSTER_HEADER: "0101-000000-abcdefgh"})
    session.conf.set(SECURITY_MODE_TAG, tag)
    session.conf.set(RUNTIME_TAG, "16.4.x-scala2.12")
    assert detect(session) == Compute(expected, remote_client=True)
    if expected == CLASSIC:
        check_executor_access("s3://bucket/ds", None, session)  # the cluster's own credentials
    with pytest.raises(ValueError, match="this machine's disk"):
        check_executor_access("/tmp/ds", None, session)


def test_a_cluster_id_tag_alone_marks_a_databricks_cluster(databricks_connect):
    session = databricks_connect()
    assert detect(session) == Compute(OFF_DATABRICKS)
    session.conf.set("spark.databricks.clusterUsageTags.clusterId", "0101-000000-abcdefgh")
    assert detect(session) == Compute(UNKNOWN, remote_client=True)
