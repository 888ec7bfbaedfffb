"""Every benchmark script the README or the docs cite runs, at a tiny scale, beside the reference.

The figures the docs quote come from these scripts; a script that no longer runs would leave them unreproducible
without anyone noticing. So each cited script (found in the pages, so a newly cited one must join `SMOKE_RUNS`)
runs here with its own command line at a few thousand samples, both sides where it has two, and must finish with
exit 0 and its closing report. Timings at this scale mean nothing and are not checked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.differential.reference import reference_python
from tests.docs.pages import REPO, pages, text

pytestmark = pytest.mark.reference

BENCHMARKS = REPO / "benchmarks"
_CITED = re.compile(r"benchmarks/([\w.-]+\.(?:py|sh))")

#: Scripts another part of `make test` runs already, and where.
RUN_ELSEWHERE = {
    "setup_ref.sh": "makes the reference venv (.venv-ref) of every lane",
    "patch_torchvision.py": "applied by setup_ref.sh and tests/clients/setup_venv.sh",
    "phase_limits.py": "the physical-reference children of bench.py (its `limit-*` steps, below)",
    "phase_memory.py": "the memory children of bench.py (its `memory-w2` scenario, below)",
    "share_torch.py": "tests/install/test_share_torch.py, and every venv of `make test` that holds torch",
}

#: Each script's smoke command line (after the interpreter and the script) and the text its closing report holds.
SMOKE_RUNS: dict[str, tuple[list[str], str]] = {
    "epoch_start.py": (
        ["--samples", "100K", "--rounds", "1", "--shard-samples", "100", "--modes", "sample", "loader", "construct"],
        "construct ref",
    ),
    "security_cost.py": (["--samples", "2000", "--open-shards", "50", "--random", "200", "--rounds", "1"], "mapped"),
    "loader_handover.py": (["--samples", "500", "--rounds", "1", "--epochs", "2"], '"reference"'),
    "plain_loader.py": (["--samples", "500", "--rounds", "1", "--epochs", "2"], "ours/reference"),
    "shuffle_walk.py": (["--pieces", "3", "--piece", "2000", "--rounds", "1"], "vectorised count / numpy"),
    "tabular_bench.py": (["--rows", "20000", "--rounds", "1", "--epochs", "2"], '"reference"'),
    "incremental_cost.py": (["--rows", "20000", "--files", "4"], "rows_read"),
    "mirror_cost.py": (["--shards", "40", "--rows-per-shard", "20", "--files", "3"], "shard_bytes_written"),
    "delta_change_cost.py": (["--rows", "4000", "--files", "4"], "data_bytes_read"),
    "delta_stream.py": (["--rows", "4000", "--files", "4", "--rounds", "1"], "delta/mds"),
    "table_walk.py": (["--mode", "mirror"], "climbs_back_up"),
    "mds_log_growth.py": (["--shards", "200", "--runs", "20"], "log_files_after_vacuum_7d"),
    "remote_bench.py": ([], "cold"),
    "spark_wide_rows.py": (["--rows", "2", "--row-mb", "1"], "worker_peak_mib"),
    "bench.py": ([], "ours/ref"),
}


def cited_scripts() -> set[str]:
    """The benchmark scripts named by the README and the docs site's pages."""
    return {name for page in pages() for name in _CITED.findall(text(page))}


def test_every_cited_script_has_a_smoke_run():
    missing = cited_scripts() - SMOKE_RUNS.keys() - RUN_ELSEWHERE.keys()
    assert not missing, f"cited in the docs but never run by the suite: {sorted(missing)}; add them to SMOKE_RUNS"
    for name in (*SMOKE_RUNS, *RUN_ELSEWHERE):
        assert (BENCHMARKS / name).is_file(), name


def _environment(tmp_path: Path) -> dict[str, str]:
    reference = reference_python()
    environment = {name: value for name, value in os.environ.items() if not name.startswith("BENCH_")}
    environment.update(
        BENCH_REF_PYTHON=reference,
        MDS_REFERENCE_PYTHON=reference,
        BENCH_SCALE="0.01",
        BENCH_ROUNDS="1",
        BENCH_OUT=str(tmp_path / "out"),
        BENCH_SCRATCH=str(tmp_path / "scratch"),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        TMPDIR=str(tmp_path),
    )
    return environment


@pytest.mark.parametrize("script", sorted(SMOKE_RUNS))
def test_the_script_runs_and_reports(script, tmp_path):
    arguments, report_holds = SMOKE_RUNS[script]
    if script == "tabular_bench.py":
        # Petastorm's and Ray's sides need side venvs of several GB (benchmarks/setup_side.sh); the smoke run
        # measures ours and the reference, and the script says the others are skipped.
        arguments = [*arguments, "--petastorm-python", str(tmp_path / "none"), "--ray-python", str(tmp_path / "none")]
    if script == "delta_stream.py":
        # LitData's and petastorm's sides need side venvs (benchmarks/README.md); the smoke run measures ours.
        arguments = [
            *arguments,
            "--litdata-python",
            str(tmp_path / "none"),
            "--petastorm-python",
            str(tmp_path / "none"),
        ]
    if script == "epoch_start.py":
        arguments = [*arguments, "--scratch", str(tmp_path / "epoch-start")]
    environment = _environment(tmp_path)
    if script == "remote_bench.py":
        environment["BENCH_SCALE"] = "0.002"  # two shards: its dozens of children dominate, not the bytes
    if script == "bench.py":
        # One writer, one reader and the memory scenario: every kind of child (phase_write, phase_read, the
        # physical limits, phase_memory) at a hundredth of the scale.
        environment["BENCH_ONLY"] = "write-text-none local-seq-text memory-w2"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert report_holds in output, output[-4000:]
    assert "WRONG VALUES" not in output and "Traceback" not in output, output[-4000:]
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if last.startswith("{"):
        json.loads(last)  # the machine-readable line parses


def test_the_benchmark_harness_tests_pass():
    """benchmarks/test_harness.py: the harness's own tests (selection, medians, child failures, alternation)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(BENCHMARKS / "test_harness.py")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
