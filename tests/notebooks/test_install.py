"""The notebooks as a user runs them, install cell included: `notebooks/run_local.py` runs each notebook in a
virtualenv whose `%pip install $install` cell installs the wheel built from this checkout, copied into the
FUSE-mounted volume as a user would upload it, and the notebook then works on that volume.

All three notebooks share ONE virtualenv (`--venv`, as notebooks attached to one cluster share its
libraries): it sees the main environment's packages (pyspark, torch: nothing is reinstalled) but not this
checkout, so `import streaming` finds only what the cell installed; the first run installs the wheel, the later
ones find it installed. Each run starts Spark anew, so notebook 03 runs once here (its later runs, appending
versions, run in-process on all three volumes in `test_notebooks.py`, as do 01 and 02 on the Files API and a
mounted local path).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.notebooks.conftest import NOTEBOOKS, REPO, Volume
from tests.notebooks.helpers import assert_shards_written_as_indexed, dataset_ids, write_events

# pip's words for the first install of the wheel and for the same wheel again.
INSTALLED = re.compile(r"Successfully installed mds-streaming|mds-streaming is already installed with the same version")
ROWS = 600
BATCH = 50


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


@pytest.fixture(scope="session")
def notebook_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one virtualenv every notebook of the session runs in (created by the first run, empty until then)."""
    return tmp_path_factory.mktemp("notebook-venv") / "venv"


def run_installed(notebook: str, widgets: dict[str, str], venv: Path, cwd: Path) -> dict[str, Any]:
    """Run ``notebook`` through the runner's command line in ``venv``; return its exit value, checking the install."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    environment["SPARK_LOCAL_IP"] = "127.0.0.1"
    command = [sys.executable, str(NOTEBOOKS / "run_local.py"), str(NOTEBOOKS / notebook), f"--venv={venv}"]
    command += [f"--widget={name}={value}" for name, value in widgets.items()]
    run = subprocess.run(command, env=environment, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"[run_local] running in the kept virtualenv: {venv}\n" in run.stdout
    assert f"[run_local] {venv}: pip install {widgets['install']}" in run.stdout
    assert INSTALLED.search(run.stdout), run.stdout[-3000:]
    installed = f"from {venv}/lib/python3.{sys.version_info.minor}/site-packages/streaming"
    assert installed in run.stdout, "the notebook must import the installed wheel, not this checkout"
    return json.loads(run.stdout.split("[run_local] dbutils.notebook.exit: ", 1)[1].split("\n", 1)[0])


@pytest.fixture
def wheel_on_volume(built_wheel: Path, fuse_volume: Volume) -> str:
    """The wheel uploaded to the FUSE volume: the `install` widget value."""
    shutil.copy(built_wheel, fuse_volume.disk(built_wheel.name))
    return fuse_volume.path(built_wheel.name)


def test_convert_then_train_install_the_wheel_from_the_volume(wheel_on_volume, fuse_volume, notebook_venv, tmp_path):
    out = fuse_volume.path("demo")
    widgets = {"install": wheel_on_volume, "out": out, "rows": str(ROWS), "size_limit": "16kb"}
    summary = run_installed("01_convert_to_mds.py", widgets, notebook_venv, tmp_path)
    assert summary["samples"] == summary["dataset_samples"] == ROWS and summary["shards"] > 2
    assert_shards_written_as_indexed(fuse_volume.disk("demo"))

    checkpoints = tmp_path / "checkpoints"
    widgets = {
        "install": wheel_on_volume,
        "data": out,
        "cache": str(tmp_path / "cache"),
        "checkpoints": str(checkpoints),
        "batch_size": str(BATCH),
    }
    result = run_installed("02_train_from_volume.py", widgets, notebook_venv, tmp_path)
    steps = ROWS // BATCH
    assert result["single_steps"] == steps
    assert result["resumed_at"] == steps // 2 * BATCH
    assert result["resumed_samples"] == ROWS - steps // 2 * BATCH
    distributed = result["distributed"]
    assert distributed["world_size"] == 2 and distributed["ranks_resumed_ok"] == [True, True]
    assert distributed["sample_in_epoch"] == (ROWS // 2 // BATCH) // 2 * BATCH * 2
    assert distributed["ids_seen_by_every_rank"] == 0
    assert sorted(path.name for path in checkpoints.iterdir()) == ["distributed.pt", "single.pt"]


def test_incremental_job_installs_the_wheel_then_converts_the_table(
    wheel_on_volume, fuse_volume, notebook_venv, tmp_path
):
    table = tmp_path / "events"
    write_events(table, 0, 100)
    widgets = {"install": wheel_on_volume, "table": str(table), "out": fuse_volume.path("events")}
    first = run_installed("03_incremental_job.py", widgets, notebook_venv, tmp_path)
    assert (first["method"], first["previous_version"], first["version"], first["samples"]) == (
        "snapshot",
        None,
        0,
        100,
    )
    assert dataset_ids(fuse_volume.path("events"), tmp_path / "cache") == list(range(100))


def test_a_run_without_venv_uses_a_temporary_virtualenv_it_deletes(runner, capfd):
    assert runner.run_in_throwaway_venv(["--help"]) == 0
    out = capfd.readouterr().out
    folder = out.split("[run_local] running in a throwaway virtualenv: ", 1)[1].split("\n", 1)[0]
    assert "--venv FOLDER" in out and not os.path.exists(folder)
