"""Tests of the benchmark harness itself (selection, medians, child failures, alternation, inputs).

Run with `.venv/bin/python -m pytest benchmarks -q`. The end-to-end tests drive the real child
processes against a tiny fake `streaming` package, so they need neither the reference venv nor the
project's package.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from dataclasses import replace

import inputs
import patch_torchvision
import pytest
import report
from bench import BenchRun, parse_config, run
from runner import Side, Workspace, run_child
from scenarios import Metric, Scenario, Step, catalogue, select


def test_select_by_name_group_and_prefix():
    everything = catalogue(0.01)
    chosen, explicit = select(everything, ["import", "write-text"])
    names = ["write-text-none", "write-text-zstd", "import", "import-api"]
    assert [s.name for s in chosen] == names and explicit == set(names)
    later, explicit = select(everything, ["later"])
    assert later and all(s.group == "later" for s in later) and explicit == set()
    assert select(everything, [])[0] == everything


def test_select_unknown_name_lists_valid_choices():
    with pytest.raises(ValueError, match="unknown scenario.*bogus.*write-tokens-none"):
        select(catalogue(1), ["bogus"])


def test_scale_shrinks_sample_counts_with_a_floor():
    write = {s.name: s for s in catalogue(0.5)}["write-tokens-none"]
    assert write.steps[0].args["n"] == 10_000
    tiny = {s.name: s for s in catalogue(0.0001)}["write-tokens-none"]
    assert tiny.steps[0].args["n"] == 500


def test_figure_is_median_of_successful_rounds_and_flags_wrong_values():
    metric = Metric("samples_per_s", "samples/s", "higher")
    results = [
        {"samples_per_s": 10},
        {"error": "boom"},
        {"samples_per_s": 30, "values_ok": False},
        {"samples_per_s": 20},
    ]
    found = report.figure(metric, results)
    assert found.value == 20.0 and found.rounds == 4 and found.rounds_ok == 3
    assert found.errors == ["boom"] and found.wrong_values == 1
    assert found.cell() == "20.0 (3/4 rounds) WRONG VALUES"


def test_side_without_a_value_shows_its_error():
    found = report.figure(Metric("p50_us", "p50", "lower"), [{"error": "ImportError: x"}])
    assert found.value is None and found.cell() == "n/a (error ImportError: x)"


def test_ratio_and_verdict_follow_the_goal():
    faster = report.Row("s", "samples/s", "higher", report.Figure(100.0), report.Figure(250.0))
    assert faster.ratio == 2.5 and faster.verdict() == "2.50x better"
    slower = report.Row("s", "p50 us", "lower", report.Figure(10.0), report.Figure(20.0))
    assert slower.ratio == 2.0 and slower.verdict() == "2.00x worse"
    even = report.Row("s", "s", "lower", report.Figure(10.0), report.Figure(10.1))
    assert even.verdict() == "same"
    missing = report.Row("s", "s", "higher", report.Figure(10.0), report.Figure(None, 1, 0))
    assert missing.ratio is None and missing.verdict() == ""


def test_render_lists_each_error_once():
    rows = [
        report.Row("a", "m1", "higher", report.Figure(1.0), report.Figure(None, 1, 0, errors=["E1"])),
        report.Row("a", "m2", "higher", report.Figure(1.0), report.Figure(None, 1, 0, errors=["E1"])),
    ]
    table = report.render(rows)
    assert table.count("- a [ours]: E1") == 1
    assert "| a | m1 | 1.00 | n/a (error E1) |  |  |" in table


@pytest.fixture
def workspace(tmp_path):
    for name in ("scratch", "inputs", "logs"):
        (tmp_path / name).mkdir()
    return Workspace(str(tmp_path / "scratch"), str(tmp_path / "inputs"), str(tmp_path / "logs"))


def test_child_errors_are_reported_not_raised(workspace):
    result = run_child(Side("ours", sys.executable), "no-such-phase", {}, workspace, "t1", 60)
    assert result["error"].startswith("ValueError: unknown phase 'no-such-phase'; valid phases:")
    assert result["wall_s"] > 0


def test_missing_interpreter_is_an_error(workspace):
    result = run_child(Side("ours", "/nonexistent/python"), "about", {}, workspace, "t2", 60)
    assert result["error"].startswith("cannot start /nonexistent/python")


def test_hung_child_is_killed_at_the_timeout(workspace, tmp_path):
    sleeper = tmp_path / "sleepy-python"
    sleeper.write_text("#!/bin/sh\nsleep 30\n")
    sleeper.chmod(0o755)
    result = run_child(Side("ours", str(sleeper)), "about", {}, workspace, "t3", 0.5)
    assert result["error"] == "child timed out after 0.5 s" and result["exit_code"] == "timeout"
    assert result["wall_s"] < 10


def _fake_package(root, body: str) -> str:
    package = root / "streaming"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(body))
    return str(root)


def test_alternating_rounds_medians_and_per_side_errors(tmp_path, monkeypatch):
    good = _fake_package(
        tmp_path / "good",
        """
        __version__ = "fake"
        MDSWriter = LocalDataset = StreamingDataset = object
    """,
    )
    broken = _fake_package(tmp_path / "broken", "raise ImportError('half-written package')\n")
    monkeypatch.setenv("BENCH_SCRATCH", str(tmp_path / "scratch"))
    monkeypatch.setenv("BENCH_OURS_PYTHONPATH", broken)
    config, _ = parse_config(
        [
            "--ours-python",
            sys.executable,
            "--ref-python",
            sys.executable,
            "--rounds",
            "2",
            "--out",
            str(tmp_path / "out"),
        ],
        dict(os.environ),
    )
    config = replace(config, ref=Side("ref", sys.executable, good))
    scenario = Scenario(
        "import",
        "formats",
        (Step("import"),),
        (Metric("import_s", "import s", "lower"), Metric("notable_modules", "modules", "info")),
    )
    rows, loads = run(config, [scenario], set())
    assert len(loads) == 6 and all(load >= 0 for load in loads)  # 2 about + 4 measured children
    assert isinstance(rows[0].ref.value, float) and rows[0].ref.rounds_ok == 2
    assert rows[1].ref.value == "none"
    assert rows[0].ours.cell().startswith("n/a (error ImportError: half-written package")
    with open(tmp_path / "out" / "results.jsonl") as f:
        records = [json.loads(line) for line in f]
    children = [(r["side"], r["round"]) for r in records if r["kind"] == "child" and r["phase"] == "import"]
    assert children == [("ref", 1), ("ours", 1), ("ref", 2), ("ours", 2)]
    assert [r["metric"] for r in records if r["kind"] == "row"] == ["import s", "modules"]
    assert not (tmp_path / "scratch").exists()


def test_failed_prep_marks_both_sides(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_SCRATCH", str(tmp_path / "scratch"))
    config, _ = parse_config(
        [
            "--ours-python",
            sys.executable,
            "--ref-python",
            sys.executable,
            "--rounds",
            "1",
            "--out",
            str(tmp_path / "out"),
        ],
        dict(os.environ),
    )
    scenario = Scenario(
        "x",
        "formats",
        (Step("import"),),
        (Metric("import_s", "s", "lower"),),
        prep=(Step("inputs", {"schema": "nope", "n": 1}),),
    )
    bench = BenchRun(config)
    try:
        rows = bench.measure(scenario)
    finally:
        bench.close()
    for figure in (rows[0].ref, rows[0].ours):
        assert figure.errors[0].startswith("prep inputs failed: ValueError: unknown schema 'nope'")


@pytest.mark.parametrize("schema", inputs.SCHEMAS)
def test_inputs_are_deterministic_and_keys_match(tmp_path, schema):
    rows, payload = inputs.samples(str(tmp_path / "a"), schema, 5)
    again, _ = inputs.samples(str(tmp_path / "b"), schema, 5)
    keys = [inputs.key_of(schema, row) for row in rows]
    assert keys == [inputs.key_of(schema, row) for row in again]
    assert keys == inputs.expected_keys(str(tmp_path / "a"), schema, 5)
    assert len(set(keys)) == 5 and payload > 0


def test_patch_guards_register_fake_once(tmp_path):
    target = tmp_path / "_meta_registrations.py"
    target.write_text(
        'import torch\n\n\n@torch.library.register_fake("torchvision::nms")\n'
        "def meta_nms():\n    pass\n\n\n"
        '@torch.library.register_fake("torchvision::roi_align")\n'
        "def meta_roi():\n    pass\n"
    )
    assert patch_torchvision.patch(target) == 2
    patched = target.read_text()
    assert "@torch.library.register_fake(" not in patched
    assert patched.count(f'@{patch_torchvision.MARKER}("torchvision::') == 2
    compile(patched, str(target), "exec")
    assert patch_torchvision.patch(target) == 0


def test_share_of_physical_is_one_at_the_limit_and_below_one_short_of_it():
    rate = report.Row("s", "samples/s", "higher", report.Figure(50.0), report.Figure(80.0), report.Figure(100.0))
    assert rate.share_of_physical(rate.ours) == 0.8 and rate.share_of_physical(rate.ref) == 0.5
    latency = report.Row("s", "p50 us", "lower", report.Figure(4.0), report.Figure(2.0), report.Figure(1.0))
    assert latency.share_of_physical(latency.ours) == 0.5 and latency.share_of_physical(latency.ref) == 0.25
    unmeasured = report.Row("s", "construct s", "lower", report.Figure(1.0), report.Figure(1.0))
    assert unmeasured.share_of_physical(unmeasured.ours) is None
    table = report.render([replace(rate, physical_label="mmap")])
    assert "| s | samples/s | 50.0 | 80.0 | 100 | 0.80 | 0.50 | 1.60 | 1.60x better |" in table
    assert "- s and alike: mmap" in table


@pytest.mark.parametrize("schema", inputs.SCHEMAS)
def test_physical_phases_read_the_same_values_from_a_written_dataset(tmp_path, schema):
    import phase_limits
    from child import Context

    from streaming import MDSWriter

    n = 300
    rows, _ = inputs.samples(str(tmp_path / "inputs"), schema, n)
    with MDSWriter(out=str(tmp_path / "ds"), columns=inputs.COLUMNS[schema], size_limit=1 << 18) as writer:
        for row in rows:
            writer.write(row)
    context = Context(str(tmp_path), str(tmp_path / "inputs"), "physical")
    assert phase_limits.limit_iter(context, schema, n, "ds", passes=1)["values_ok"]
    random_reads = phase_limits.limit_random(context, schema, n, "ds")
    assert random_reads["values_ok"] and 0 < random_reads["p50_us"] <= random_reads["p99_us"]
    zstd = phase_limits.limit_zstd(context, schema, n, "ds", repeats=1)
    written = phase_limits.limit_write(context, schema, n, "ds", repeats=1)
    assert zstd["samples_per_s"] > 0 and 0 < zstd["out_mb"] < written["out_mb"]
    shards = sum(
        os.path.getsize(tmp_path / "ds" / name) for name in os.listdir(tmp_path / "ds") if name != "index.json"
    )
    assert written["out_mb"] == shards / 1e6


def test_memory_phases_measure_every_process_of_one_epoch(tmp_path):
    import phase_memory
    from child import Context

    from streaming import MDSWriter

    n = 300
    rows, _ = inputs.samples(str(tmp_path / "inputs"), "tokens", n)
    with MDSWriter(out=str(tmp_path / "ds"), columns=inputs.COLUMNS["tokens"], size_limit=1 << 18) as writer:
        for row in rows:
            writer.write(row)
    context = Context(str(tmp_path), str(tmp_path / "inputs"), "ours")
    for phase in (phase_memory.memory, phase_memory.limit_memory):
        figures = phase(context, n, "ds")
        assert figures["values_ok"], phase.__name__
        assert len(figures["split"]["workers"]) == phase_memory.WORKERS
        for process in ("main", "worker"):
            uss, pss, rss = (figures[f"{process}_{kind}_mb"] for kind in ("uss", "pss", "rss"))
            assert 0 < figures[f"{process}_heap_uss_mb"] <= uss <= pss <= rss, (phase.__name__, process)


def test_memory_split_sums_to_what_psutil_reads():
    # psutil reads /proc/<pid>/smaps_rollup where the kernel has it: the kernel's own totals, not our parse.
    import memory_split
    import psutil

    ours = memory_split.memory(os.getpid())
    theirs = psutil.Process().memory_full_info()
    for key, field in (("rss", "rss"), ("pss", "pss"), ("uss", "uss")):
        assert abs(ours[key] - getattr(theirs, field) / (1 << 20)) < 2.0, key
