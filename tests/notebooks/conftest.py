"""Fixtures of the notebook tests: the shared local SparkSession, the runner, and a `/Volumes/...` folder
served either by the fake Databricks server (Files API) or by a local directory mounted at `/Volumes`.

The SparkSession is the suite's one session: an active session (started by `tests/spark`) is reused, and
otherwise one is built with the exact settings of `tests/spark/conftest.py`, which then reuses it. The
mounted volume is a symlink `/Volumes/<unique catalog>/default/vol` to a folder of the test's `tmp_path`,
removed afterwards (creating it needs write access to `/`, as root in CI containers); the FUSE volume is a
folder on the run's FUSE mount (`tests/volume_fuse.py`), which refuses what a cluster's `/Volumes` refuses.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from streaming.storage.registry import volume_mount
from tests.services import Service
from tests.spark.conftest import reused_session
from tests.volume_fuse import FuseVolume

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
VOLUMES = Path("/Volumes")


@pytest.fixture(scope="session")
def runner() -> ModuleType:
    """`notebooks/run_local.py`, imported as a module."""
    spec = importlib.util.spec_from_file_location("run_local", NOTEBOOKS / "run_local.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_local"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def isolated_environment(credential_free_environment: None, private_tempdir: str) -> Iterator[None]:
    """Every notebook test runs without the machine's credentials (see `credential_free_environment`), and its
    temporary folders go into its own directory (`private_tempdir`)."""
    yield


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The suite's local SparkSession (reused when already running)."""
    yield from reused_session(tmp_path_factory)


@dataclass(frozen=True)
class Volume:
    """A fresh `/Volumes/...` folder and where its files physically land on this machine."""

    kind: str
    root: str
    on_disk: Path

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def disk(self, relative: str) -> Path:
        return self.on_disk / relative


@pytest.fixture
def files_api_volume(fake_databricks: Service, monkeypatch: pytest.MonkeyPatch) -> Volume:
    """A `/Volumes/main/default/vol/<unique>` folder on the fake server, with its credentials set."""
    monkeypatch.setenv("DATABRICKS_HOST", fake_databricks.endpoint)
    monkeypatch.setenv("DATABRICKS_TOKEN", fake_databricks.extra["token"])
    root = f"/Volumes/main/default/vol/{uuid.uuid4().hex[:12]}"
    assert volume_mount(root) is None, f"{root} is mounted on this machine; the Files API test needs it not to be"
    return Volume("files_api", root, Path(fake_databricks.extra["root"]) / root.lstrip("/"))


@pytest.fixture
def mounted_volume(tmp_path: Path) -> Iterator[Volume]:
    """A `/Volumes/<unique catalog>/default/vol` folder that is a local directory (as on a cluster)."""
    catalog = VOLUMES / f"mds_ci_{uuid.uuid4().hex[:10]}"
    created_root = not VOLUMES.exists()
    target = tmp_path / "volume"
    target.mkdir()
    try:
        (catalog / "default").mkdir(parents=True)
    except PermissionError:
        pytest.fail(
            f"The mounted-volume tests create {catalog}: run them as a user that may create /Volumes "
            f"(root in CI), or create /Volumes writable for this user first."
        )
    (catalog / "default" / "vol").symlink_to(target, target_is_directory=True)
    try:
        root = f"{catalog}/default/vol"
        assert volume_mount(root) == root
        yield Volume("mounted", root, target)
    finally:
        (catalog / "default" / "vol").unlink()
        shutil.rmtree(catalog, ignore_errors=True)
        if created_root:
            with contextlib.suppress(OSError):
                VOLUMES.rmdir()


@pytest.fixture
def fuse_volume(fuse_volume_mount: FuseVolume) -> Volume:
    """A fresh folder on the FUSE-mounted `/Volumes/...` (no appends, no random writes, no links: see volume_fuse)."""
    root, backing = fuse_volume_mount.folder()
    assert volume_mount(root) == root
    return Volume("fuse", root, backing)


@pytest.fixture(params=["files_api", "mounted", "fuse"])
def volume(request: pytest.FixtureRequest) -> Volume:
    """Each way a notebook reaches `/Volumes/...` in turn: the Files API, a mounted local path, a FUSE mount."""
    return request.getfixturevalue(f"{request.param}_volume")


@pytest.fixture
def no_databricks_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing the databricks-sdk default chain could use (the autouse isolation already cleared the rest)."""
    for name in list(os.environ):
        if name.startswith("DATABRICKS_") and name != "DATABRICKS_CONFIG_FILE":
            monkeypatch.delenv(name)
