"""Run streaming-community 0.14.2's own public-behaviour test modules against this package.

Fetches the reference's sdist from PyPI once (cached under ``.ci/upstream-suite/``, gitignored), lays our harness
(``harness/``: the ``tests`` package helpers those modules import) beside its test modules in a scratch folder, and
runs them with pytest against this checkout's ``streaming``. Remote-only tests are deselected by the marks
upstream's own pytest addopts use; ``exclusions.toml`` lists every other deselected test, the duplicative
parametrizations thinned out for time, and the expected failures, each with its reason (the harness conftest
applies the last two). Nothing of upstream's is committed.

Usage: ``python tests/upstream_suite/run.py [extra pytest args]``; exits with pytest's status.
"""

import os
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import tomllib

REFERENCE = "streaming-community==0.14.2"
SDIST_NAME = "streaming_community-0.14.2"
# The reference's test modules that exercise public behaviour this package promises (the converters are covered by
# test_util's dataframe_to_mds cases: the sdist ships no separate converters module).
MODULES = [
    "writer",
    "reader",
    "encodings",
    "compression",
    "hashing",
    "streaming",
    "partition",
    "shuffle",
    "sampling",
    "mixing",
    "eviction",
    "local",
    "laziness",
    "unsafe_types",
    "util",
]
SUITE_DIR = Path(__file__).resolve().parent
REPO_ROOT = SUITE_DIR.parents[1]
CACHE_DIR = REPO_ROOT / ".ci" / "upstream-suite"
SCRATCH_DIR = CACHE_DIR / "run"
EXCLUSIONS = SUITE_DIR / "exclusions.toml"


def fetch_sdist() -> Path:
    """The unpacked reference sdist, downloaded with pip and unpacked on first use."""
    source = CACHE_DIR / SDIST_NAME
    if (source / "PKG-INFO").is_file():
        return source
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    archive = CACHE_DIR / f"{SDIST_NAME}.tar.gz"
    if not archive.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", REFERENCE]
            + ["--dest", str(CACHE_DIR)],
            check=True,
        )
    with tarfile.open(archive) as sdist:
        sdist.extractall(CACHE_DIR, filter="data")
    return source


def upstream_pytest_config(source: Path) -> tuple[str, list[str]]:
    """The mark expression of upstream's own pytest addopts and its warning filters."""
    options = tomllib.loads((source / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = shlex.split(options["addopts"])
    mark_expression = addopts[addopts.index("-m") + 1]
    return mark_expression, list(options.get("filterwarnings", []))


def lay_out_scratch(source: Path, warning_filters: list[str]) -> None:
    """A fresh folder: ``tests/`` = upstream's listed modules + our harness, and a pytest.ini of our own."""
    shutil.rmtree(SCRATCH_DIR, ignore_errors=True)
    shutil.copytree(SUITE_DIR / "harness", SCRATCH_DIR / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    # Kept under another name in this repository so that our own suite's collection never loads it.
    (SCRATCH_DIR / "tests" / "conftest_upstream.py").rename(SCRATCH_DIR / "tests" / "conftest.py")
    for module in MODULES:
        shutil.copy2(source / "tests" / f"test_{module}.py", SCRATCH_DIR / "tests")
    filters = "".join(f"\n    {line}" for line in warning_filters)
    (SCRATCH_DIR / "pytest.ini").write_text(f"[pytest]\ntimeout = 300\nfilterwarnings ={filters}\n")


def pytest_command(mark_expression: str, extra: list[str]) -> list[str]:
    deselected = tomllib.loads(EXCLUSIONS.read_text())["deselect"]
    command = [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider", "-m", mark_expression]
    for node_id in deselected:
        command += ["--deselect", node_id]
    chosen = any(arg.startswith("tests/") for arg in extra)  # else every laid-out module
    return command + ([] if chosen else ["tests"]) + extra


def main(extra: list[str]) -> int:
    source = fetch_sdist()
    mark_expression, warning_filters = upstream_pytest_config(source)
    lay_out_scratch(source, warning_filters)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["MDS_UPSTREAM_PACKAGE_DIR"] = str(REPO_ROOT / "streaming")
    env["MDS_UPSTREAM_EXPECTATIONS"] = str(EXCLUSIONS)
    # test_util's dataframe_to_mds cases start a local Spark: its workers must run this interpreter.
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return subprocess.run(pytest_command(mark_expression, extra), cwd=SCRATCH_DIR, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
