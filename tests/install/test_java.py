"""Without Java, `make demo` and the local notebook runner stop first with one sentence naming the install, where
Spark would end in JAVA_GATEWAY_EXITED after minutes of installing: run with a PATH that really holds no java."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NO_JAVA = (
    "Spark needs Java 17 or later and there is no java on the PATH: install it with apt-get install "
    "openjdk-17-jre-headless (Debian, Ubuntu) or brew install openjdk@17 (macOS).\n"
)


def path_without_java(tmp_path: Path) -> dict[str, str]:
    """This environment without JAVA_HOME or make's flags, its PATH one folder of links to every command on it but
    ``java``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for command in Path(directory).glob("*") if os.path.isdir(directory) else ():
            link = folder / command.name
            if command.name != "java" and not link.exists() and os.access(command, os.X_OK):
                link.symlink_to(command)
    # Nor a calling make's flags: under `make test` (`--output-sync`) they would make the inner make print its
    # directory on stdout, which a user typing `make demo` never sees.
    environment = {
        key: value
        for key, value in os.environ.items()
        if key != "JAVA_HOME" and key not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    }
    environment["PATH"] = str(folder)
    assert shutil.which("java", path=environment["PATH"]) is None
    return environment


def test_run_local_checks_java_before_starting_spark(tmp_path):
    environment = path_without_java(tmp_path)
    run = subprocess.run(
        [sys.executable, str(REPO / "notebooks" / "run_local.py"), "--check-java"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )
    assert (run.returncode, run.stderr) == (1, NO_JAVA)


def test_run_local_accepts_this_machines_java():
    run = subprocess.run(
        [sys.executable, str(REPO / "notebooks" / "run_local.py"), "--check-java"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (run.returncode, run.stdout) == (0, "[run_local] Java can run Spark.\n"), run.stderr


def test_make_demo_stops_before_installing_anything(tmp_path):
    environment = path_without_java(tmp_path)
    environment["DEMO_VENV"] = str(tmp_path / "demo-venv")
    run = subprocess.run(["make", "-s", "demo"], cwd=REPO, capture_output=True, text=True, env=environment, timeout=60)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith(NO_JAVA)
    assert not (tmp_path / "demo-venv").exists()
