"""Suite-wide test settings: keep temp files, locks and caches of each run apart from other runs."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def out_dir(tmp_path):
    """A fresh, not yet existing output directory."""
    return os.path.join(tmp_path, "out")
