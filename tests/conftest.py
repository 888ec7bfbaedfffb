"""Suite-wide test settings: shared fixtures, markers from what a test uses, and per-run temp files, locks, caches.

The storage servers (`tests/services.py`) and the buckets and `Remote`s on them (`tests/remotes.py`) are
plugins of the whole suite, so no test module imports fixtures. None of them is autouse; directories whose
tests must run without the machine's credentials request `credential_free_environment` from an autouse
fixture of their own conftest.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.volume_fuse import FuseVolume, mounted_fuse_volume

pytest_plugins = ["tests.services", "tests.servers.hub_and_sftp", "tests.remotes"]

# A test that requests any of these (directly or through other fixtures) talks to the loopback servers, or
# needs a SparkSession. `remote_factory` and the notebooks' `volume` start servers through
# `request.getfixturevalue`, which collection cannot see, so they are named here too, as is tests/cli's `s3_store`.
SERVICE_FIXTURES = frozenset(
    {"seaweedfs", "azurite", "fake_gcs", "fake_databricks", "fake_oci", "remote_factory", "volume", "s3_store"}
)
SPARK_FIXTURES = frozenset(
    {
        "spark",
        "connect",
        "connect_server",
        "session",
        "delta_spark",
        "delta_connect",
        "delta_connect_server",
        "delta_session",
    }
)


def pytest_configure(config):
    """Give this run (and every process it starts) its own coordination-state root."""
    if "STREAMING_STATE_DIR" not in os.environ:
        root = tempfile.mkdtemp(prefix="streaming-test-state-")
        os.environ["STREAMING_STATE_DIR"] = root
        config._streaming_state_dir = root


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `services` and `spark` every test that uses them, so `-m` selects exactly those."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & SERVICE_FIXTURES:
            item.add_marker(pytest.mark.services)
        if used & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Finalize abandoned DataLoader iterators now, in the main thread, and keep the cyclic collector off after.

    A test that stops reading a multi-worker DataLoader mid-epoch leaves its iterator in a reference cycle. Left to
    the collector, it may be finalized at interpreter exit inside a multiprocessing queue's feeder thread while that
    thread holds the queue's lock; its worker shutdown then puts to that same queue and waits on the lock for ever,
    and so does the exit (seen once in CI: every test had passed and the lane never ended)."""
    gc.collect()
    gc.disable()


def pytest_unconfigure(config):
    root = getattr(config, "_streaming_state_dir", None)
    if root:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def out_dir(tmp_path):
    """A fresh, not yet existing output directory."""
    return os.path.join(tmp_path, "out")


@pytest.fixture(scope="session")
def private_tempdirs() -> Iterator[str]:
    """The folder that holds every test's `private_tempdir`, removed at the end of the run.

    Not removed per test: multiprocessing keeps the first temporary folder it makes in a process for the rest of
    it (its socket for sharing descriptors with DataLoader workers lives there).
    """
    root = tempfile.mkdtemp(prefix="test-tmp-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def private_tempdir(monkeypatch: pytest.MonkeyPatch, private_tempdirs: str) -> str:
    """`tempfile.gettempdir()` in a folder of this test's own, for the folders writers stage remote output in.

    A writer that fails keeps its staged files for good (its error names the folder), so tests that make writers
    fail request this from an autouse fixture of their conftest, and nothing is left in the machine's ``/tmp``.
    The path stays short (not under ``tmp_path``): multiprocessing puts sockets there, and a socket's path is at
    most 107 bytes.
    """
    folder = tempfile.mkdtemp(dir=private_tempdirs)
    monkeypatch.setattr(tempfile, "tempdir", folder)
    return folder


@pytest.fixture(scope="session")
def fuse_volume_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuseVolume]:
    """`/Volumes/<unique catalog>/default/vol` as a FUSE mount with a Databricks volume's limits (one per run)."""
    yield from mounted_fuse_volume(tmp_path_factory.mktemp("fuse-volume"))
