"""`notebooks/formats_demo.py`, the last step of `make demo`, run as the README's users run it: a script of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_formats_demo_writes_and_reads_back_every_encoding(tmp_path):
    out = tmp_path / "formats"
    run = subprocess.run(
        [sys.executable, str(NOTEBOOKS / "formats_demo.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "read back and checked 200 samples" in run.stdout
    assert (out / "index.json").is_file()
