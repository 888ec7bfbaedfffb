"""Real Delta Lake in local Spark: a classic session and a Spark Connect server that load Delta's jars.

The jars are Delta's own releases from Maven Central (`tests.delta_lake.jars`: one pinned release per Spark line,
fetched with ``mvn`` into .ci/ and cached), loaded with ``spark.jars`` and switched on as Delta documents it: the
``DeltaSparkSessionExtension`` SQL extension and the ``DeltaCatalog`` as the session catalog. Tables are written by
Delta Lake itself through Spark SQL, as a Databricks user writes them, and read back by name.

One session per test run (a JVM start is the lane's largest cost); the Connect server starts with the first test
that needs it where the running pyspark ships the Connect server jar (pyspark 4.x), and its tests are deselected
where it does not (pyspark 3.5 with ``MDS_SPARK_CLASSIC_ONLY=1``, as the floor lane runs). Each test makes its own
tables, under unique names in the session's warehouse.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pyspark
import pytest

from tests.delta_lake.jars import delta_jars, release_for
from tests.spark.conftest import CLASSIC_ONLY, ConnectServer, deselect_connect_tests, local_session


def delta_conf() -> dict[str, str]:
    """What makes a Spark session read and write Delta tables, with the pinned jars."""
    return {
        "spark.jars": ",".join(delta_jars(pyspark.__version__)),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # VACUUM with a zero retention, which the log-cleanup and VACUUM tests run on purpose.
        "spark.databricks.delta.retentionDurationCheck.enabled": "false",
        # A snapshot's log replay in 2 tasks, not 50: these tables have a few dozen actions.
        "spark.databricks.delta.snapshotPartitions": "2",
    }


def pytest_report_header(config: pytest.Config) -> str:
    try:
        release = release_for(pyspark.__version__)
    except RuntimeError as err:
        return str(err)  # the fixtures fail with it
    connect = "classic only" if CLASSIC_ONLY else "classic and Connect"
    return f"Delta Lake {release.delta_version} ({release.spark_artifact}) on pyspark {pyspark.__version__}: {connect}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the Connect tests where pyspark ships no Connect server jar (see the module docstring)."""
    deselect_connect_tests(config, items, os.path.dirname(__file__), "delta_connect")


@pytest.fixture(scope="session")
def delta_connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server whose sessions read and write Delta tables."""
    server = ConnectServer(tmp_path_factory.mktemp("delta-connect"), delta_conf())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The classic local SparkSession with Delta Lake."""
    session = local_session(str(tmp_path_factory.mktemp("delta-warehouse")), delta_conf())
    extensions = session.conf.get("spark.sql.extensions", "") or ""
    if "DeltaSparkSessionExtension" not in extensions:
        pytest.fail(
            "A SparkSession without Delta Lake was already running: run tests/delta_lake in a pytest of its own."
        )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def delta_connect(delta_connect_server: ConnectServer) -> Iterator[object]:
    """A Spark Connect client session on the Delta-enabled server, in a process in Connect mode (as a Databricks
    Connect or serverless client is): pyspark's functions and windows then build Connect expressions."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    if os.environ.get("SPARK_CONNECT_MODE_ENABLED") != "1":
        pytest.fail(
            "The Connect tests run in a pytest of their own with SPARK_CONNECT_MODE_ENABLED=1 (make test-delta)."
        )

    session = RemoteSparkSession.builder.remote(delta_connect_server.url).getOrCreate()
    yield session
    session.stop()


@pytest.fixture(params=["classic", "connect"])
def delta_session(request: pytest.FixtureRequest) -> object:
    """Run a test once on the classic session and once over Spark Connect."""
    return request.getfixturevalue("delta_spark" if request.param == "classic" else "delta_connect")


_names = itertools.count()


@pytest.fixture
def table_name(request: pytest.FixtureRequest) -> str:
    """A table name no other test of the run uses (the warehouse is shared by the session)."""
    return f"default.t{next(_names)}_{os.getpid()}"
