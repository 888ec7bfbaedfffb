"""A public name or command whose optional package is not installed answers with one sentence naming the package
and the `pip install` that brings it, run in a virtualenv that really lacks it (`core_python`), where this checkout is
on the path and mds-streaming is not installed: the command installs this checkout with the extra."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python args`` on this checkout, output captured."""
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=300, env=environment)


def test_the_venv_really_lacks_torch_and_pyarrow(core_python):
    for package in ("torch", "pyarrow"):
        run_ = run(core_python, "-c", f"import {package}")
        assert f"No module named '{package}'" in run_.stderr


def test_streaming_dataset_without_torch_names_the_torch_extra(core_python):
    for name in ("StreamingDataset", "StreamingDataLoader"):
        run_ = run(core_python, "-c", f"from streaming import {name}")
        assert run_.returncode == 1
        last = run_.stderr.strip().splitlines()[-1]
        assert last == (
            f"ModuleNotFoundError: {name} needs 'torch', which is not installed. "
            f'Install it with: pip install "{REPO}[torch]"'
        )


def test_writing_and_reading_locally_needs_no_extra(core_python, tmp_path):
    script = (
        "from streaming import MDSWriter, LocalDataset\n"
        f"with MDSWriter(out={str(tmp_path)!r}, columns={{'x': 'int'}}) as w:\n"
        "    w.write({'x': 1})\n"
        f"print(LocalDataset({str(tmp_path)!r})[0]['x'])\n"
    )
    run_ = run(core_python, "-c", script)
    assert run_.returncode == 0, run_.stderr
    assert run_.stdout == "1\n"


def test_convert_without_pyarrow_names_the_cli_extra(core_python, tmp_path):
    source = tmp_path / "data.parquet"
    source.write_bytes(b"PAR1")
    run_ = run(core_python, "-m", "streaming", "convert", str(source), str(tmp_path / "out"))
    assert run_.returncode == 1
    assert run_.stderr == (
        "mds-streaming convert: error: this command needs 'pyarrow', which is not installed. "
        f'Install it with: pip install "{REPO}[cli]"\n'
    )
