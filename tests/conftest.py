"""Suite-wide test settings: keep temp files, locks and caches of each run apart from other runs."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

# The server fixtures (tests/services.py), for every test directory: importing them into each conftest
# would read to linters as unused imports shadowed by the fixture parameters.
pytest_plugins = ["tests.services"]


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
