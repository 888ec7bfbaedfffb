"""Spark fixtures: one classic local SparkSession and one Spark Connect server on loopback, per test session.

Both run ``local[2,4]`` (2 cores, up to 4 attempts per task, so injected task failures are retried), keep
every address on 127.0.0.1, use UTC and small Arrow batches (so a partition arrives in several batches).
The Connect server is a separate JVM (``spark-submit ... SparkConnectServer``) started by this fixture
and stopped at the end by its PID; the client session talks to it over gRPC like Databricks serverless.

pyspark 4.x bundles the Connect server's jar; pyspark 3.5 does not (it fetches it from Maven with
``--packages``, which this machine cannot reach). With ``MDS_SPARK_CLASSIC_ONLY=1`` (set by the Makefile for
its pyspark 3.5 run) and no bundled jar, the Connect tests are deselected and the header says so; without
the variable they run, and fail, so a missing jar never passes unnoticed.
"""

from __future__ import annotations

import glob
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyspark
import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

MASTER = "local[2,4]"
SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "64",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
START_TIMEOUT = 180.0
CONNECT_BUNDLED = bool(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "spark-connect_*.jar")))
CLASSIC_ONLY = os.environ.get("MDS_SPARK_CLASSIC_ONLY") == "1" and not CONNECT_BUNDLED


def pytest_report_header(config: pytest.Config) -> str:
    connect = "bundled" if CONNECT_BUNDLED else "not bundled"
    run = "classic only, Connect tests deselected" if CLASSIC_ONLY else "classic and Connect"
    return f"pyspark {pyspark.__version__} (Spark Connect jar {connect}): {run}"


def deselect_connect_tests(config: pytest.Config, items: list[pytest.Item], folder: str, fixture: str) -> None:
    """In a classic-only run, deselect the tests of ``folder`` that use ``fixture`` or a ``connect`` parameter."""
    if not CLASSIC_ONLY:
        return

    def on_connect(item: pytest.Item) -> bool:
        params = getattr(getattr(item, "callspec", None), "params", {})
        return str(item.path).startswith(folder) and (fixture in item.fixturenames or "connect" in params.values())

    deselected = [item for item in items if on_connect(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not on_connect(item)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the Connect tests in a classic-only run (pyspark 3.5 without the Connect jar)."""
    for fixture in ("connect", "connect_server", "bare_connect_server"):
        deselect_connect_tests(config, items, os.path.dirname(__file__), fixture)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ConnectServer:
    """A Spark Connect server process; ``url`` waits until it accepts connections.

    ``env`` replaces this process's environment for the server (and so for its Python workers).
    """

    def __init__(
        self, workdir: Path, extra_conf: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        import pyspark

        home = os.path.dirname(pyspark.__file__)
        self.port = _free_port()
        self.log = workdir / "connect-server.log"
        conf = {
            **SESSION_CONF,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.jars.ivy": str(workdir / "ivy"),
            "spark.sql.warehouse.dir": str(workdir / "warehouse"),
            **(extra_conf or {}),
        }
        argv = [
            os.path.join(home, "bin", "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            MASTER,
            "--driver-memory",
            "1g",
        ]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        argv.append("spark-internal")
        environment = {**(os.environ if env is None else env), "SPARK_HOME": home}
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(argv, env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
        self._ready = False

    @property
    def url(self) -> str:
        if not self._ready:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                    break
                except OSError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        tail = self.log.read_text(errors="replace")[-3000:]
                        pytest.fail(f"Spark Connect server did not start on port {self.port}:\n{tail}")
                    time.sleep(0.25)
            self._ready = True
        return f"sc://127.0.0.1:{self.port}"

    def _java_children(self) -> list[int]:
        """PIDs of the JVM(s) spark-submit started (it runs java as its child)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == self.process.pid:
                    pids.append(int(entry.name))
        return pids

    def stop(self) -> None:
        """Stop the JVM by its PID (then spark-submit's wrapper exits), SIGKILL after 10 s."""
        targets = self._java_children() + [self.process.pid]
        for pid in targets:
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            for pid in targets:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """The Spark Connect server (started at once, so it boots while the classic session starts)."""
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The classic local SparkSession (py4j); requesting the Connect server first overlaps both start-ups."""
    if not CLASSIC_ONLY:
        request.getfixturevalue("connect_server")
    session = local_session(str(tmp_path_factory.mktemp("warehouse")))
    yield session
    session.stop()


def local_session(warehouse_dir: str, extra_conf: Mapping[str, str] | None = None) -> object:
    """The suite's one classic local SparkSession (created, or the running one), with ``extra_conf`` on top."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(MASTER)
        .appName("mds-streaming-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.warehouse.dir", warehouse_dir)
    )
    for key, value in {**SESSION_CONF, **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def reused_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """For fixtures outside tests/spark: the running local SparkSession, or a new one that is stopped at the end."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    session = local_session(str(tmp_path_factory.mktemp("warehouse")))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect(connect_server: ConnectServer) -> Iterator[object]:
    """A Spark Connect client session on the loopback server (no JVM in this process)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(connect_server.url).getOrCreate()
    yield session
    session.stop()


@pytest.fixture(params=["classic", "connect"])
def session(request: pytest.FixtureRequest) -> object:
    """Run a test once on the classic session and once on Spark Connect."""
    return request.getfixturevalue("spark" if request.param == "classic" else "connect")
