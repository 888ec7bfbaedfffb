"""Suite-wide test settings: keep temp files, locks and caches of each run apart from other runs."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.volume_fuse import FuseVolume, mounted_fuse_volume


def pytest_configure(config):
    """Give this run (and every process it starts) its own coordination-state root."""
    if "STREAMING_STATE_DIR" not in os.environ:
        root = tempfile.mkdtemp(prefix="streaming-test-state-")
        os.environ["STREAMING_STATE_DIR"] = root
        config._streaming_state_dir = root


def pytest_unconfigure(config):
    root = getattr(config, "_streaming_state_dir", None)
    if root:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def out_dir(tmp_path):
    """A fresh, not yet existing output directory."""
    return os.path.join(tmp_path, "out")


@pytest.fixture(scope="session")
def fuse_volume_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuseVolume]:
    """`/Volumes/<unique catalog>/default/vol` as a FUSE mount with a Databricks volume's limits (one per run)."""
    yield from mounted_fuse_volume(tmp_path_factory.mktemp("fuse-volume"))
