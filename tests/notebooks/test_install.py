"""The command line runner installs for real: notebook 01 runs in a throwaway virtualenv whose `%pip` cell installs
the wheel built from this checkout, copied into the FUSE-mounted volume as a user would upload it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.notebooks.conftest import NOTEBOOKS, REPO


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built with `python -m build --wheel` (as `make` does)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("mds_streaming-*-py3-none-any.whl")
    return wheel


def test_convert_notebook_installs_the_wheel_from_a_volume_then_runs_on_it(built_wheel, fuse_volume, tmp_path):
    shutil.copy(built_wheel, fuse_volume.disk(built_wheel.name))
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    environment["SPARK_LOCAL_IP"] = "127.0.0.1"
    widgets = {"install": fuse_volume.path(built_wheel.name), "out": fuse_volume.path("demo"), "rows": "300"}
    command = [sys.executable, str(NOTEBOOKS / "run_local.py"), str(NOTEBOOKS / "01_convert_to_mds.py")]
    command += [f"--widget={name}={value}" for name, value in widgets.items()]
    run = subprocess.run(command, env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    venv = run.stdout.split("[run_local] running in a throwaway virtualenv: ", 1)[1].split("\n", 1)[0]
    assert f"[run_local] {venv}: pip install {widgets['install']}" in run.stdout
    assert "Successfully installed mds-streaming" in run.stdout
    installed = f"from {venv}/lib/python3.{sys.version_info.minor}/site-packages/streaming"
    assert installed in run.stdout, "the notebook must import the installed wheel, not this checkout"
    assert not os.path.exists(venv), "the throwaway virtualenv is deleted after the run"
    summary = json.loads(run.stdout.split("[run_local] dbutils.notebook.exit: ", 1)[1].split("\n", 1)[0])
    assert summary["samples"] == summary["dataset_samples"] == 300
    assert json.loads(fuse_volume.disk("demo/index.json").read_text())["shards"]
