"""Interpreters that really lack a piece: a virtualenv holding only the core dependencies (no torch, pyarrow,
pyspark), built once per machine under `.ci/core-venv` from pyproject.toml's list and rebuilt when that list changes.
The checkout itself is put on the path, so the code under test is this tree's."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
CORE_VENV = REPO / ".ci" / "core-venv"


def core_dependencies() -> list[str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]


@pytest.fixture(scope="session")
def core_python() -> Path:
    """The interpreter of a virtualenv with mds-streaming's core dependencies only."""
    wanted = "\n".join(core_dependencies())
    stamp = CORE_VENV / "requirements.txt"
    python = CORE_VENV / "bin" / "python"
    if not stamp.is_file() or stamp.read_text() != wanted:
        venv.create(CORE_VENV, with_pip=True, clear=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *core_dependencies()],
            check=True,
            timeout=600,
        )
        stamp.write_text(wanted)
    return python
