"""Side-by-side benchmark driver: the project's `streaming` vs MosaicML Streaming's, same scripts.

For every selected scenario: untimed prep once (reference interpreter), then N rounds of
ref, ours, physical, ref, ours, physical... each measured phase in a fresh child process (physical: the
same work on the same bytes without a dataset library, see phase_limits.py); the median per side,
each side's share of the physical figure and the ours/ref ratio go into a Markdown table (printed, and
saved as table.md) and every child result into results.jsonl, both under the run's output directory.
Normally started by benchmarks/run.sh.

Settings (a flag overrides its environment variable):
  --scale     BENCH_SCALE            sample counts multiplier [1]
  --only      BENCH_ONLY             space-separated scenario names, groups or name prefixes [all]
  --rounds    BENCH_ROUNDS           rounds per scenario [3]
  --ours-python BENCH_OURS_PYTHON    interpreter for "ours" [.venv/bin/python with PYTHONPATH=repo]
              BENCH_OURS_PYTHONPATH  PYTHONPATH for "ours" [the repo, only with the default python]
  --ref-python  BENCH_REF_PYTHON     interpreter for the reference [.bench/ref/bin/python]
  --out       BENCH_OUT              output directory [.bench/results/<time>]
              BENCH_SCRATCH          datasets directory, removed afterwards [.bench/scratch]
              BENCH_KEEP_SCRATCH=1   keep it
              BENCH_TIMEOUT          seconds before a child is killed [600]
  --list      print the scenarios and exit
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import dataclass

import report
from runner import Side, Workspace, run_child
from scenarios import Scenario, Step, catalogue, select

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.join(ROOT, ".bench")


@dataclass(frozen=True)
class Config:
    scale: float
    rounds: int
    only: list[str]
    ref: Side
    ours: Side
    out: str
    scratch: str
    inputs: str
    timeout_s: float
    keep_scratch: bool


def _interpreter(path: str) -> str:
    """A python given as a path is made absolute (children run elsewhere); a bare name stays."""
    return os.path.abspath(path) if os.sep in path else path


def _search_path(value: str) -> str:
    return os.pathsep.join(os.path.abspath(p) for p in value.split(os.pathsep) if p)


def parse_config(argv: list[str], environ: dict[str, str]) -> tuple[Config, bool]:
    """Config from flags and BENCH_* variables; the flag `--list` is returned separately."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=float(environ.get("BENCH_SCALE", "1")))
    parser.add_argument("--only", default=environ.get("BENCH_ONLY", ""))
    parser.add_argument("--rounds", type=int, default=int(environ.get("BENCH_ROUNDS", "3")))
    parser.add_argument("--ours-python", default=environ.get("BENCH_OURS_PYTHON", ""))
    parser.add_argument(
        "--ref-python", default=environ.get("BENCH_REF_PYTHON", os.path.join(BENCH_DIR, "ref", "bin", "python"))
    )
    parser.add_argument(
        "--out", default=environ.get("BENCH_OUT", os.path.join(BENCH_DIR, "results", time.strftime("%Y%m%d-%H%M%S")))
    )
    parser.add_argument("--list", action="store_true")
    options = parser.parse_args(argv)
    if options.scale <= 0 or options.rounds < 1:
        parser.error(f"need scale > 0 and rounds >= 1 (got {options.scale}, {options.rounds})")
    if options.ours_python:
        ours = Side("ours", _interpreter(options.ours_python), _search_path(environ.get("BENCH_OURS_PYTHONPATH", "")))
    else:
        ours = Side(
            "ours",
            os.path.join(ROOT, ".venv", "bin", "python"),
            _search_path(environ.get("BENCH_OURS_PYTHONPATH", ROOT)),
        )
    config = Config(
        scale=options.scale,
        rounds=options.rounds,
        only=options.only.split(),
        ref=Side("ref", _interpreter(options.ref_python)),
        ours=ours,
        out=os.path.abspath(options.out),
        scratch=os.path.abspath(environ.get("BENCH_SCRATCH", os.path.join(BENCH_DIR, "scratch"))),
        inputs=os.path.join(BENCH_DIR, "inputs"),
        timeout_s=float(environ.get("BENCH_TIMEOUT", "600")),
        keep_scratch=environ.get("BENCH_KEEP_SCRATCH", "") not in ("", "0"),
    )
    return config, options.list


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class BenchRun:
    """One run: children, their records in results.jsonl, and prep results shared by scenarios."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.workspace = Workspace(config.scratch, config.inputs, os.path.join(config.out, "logs"))
        self.sides = (config.ref, config.ours)  # measured in this order every round, then the physical bar
        self.physical = Side("physical", config.ours.python, config.ours.pythonpath)
        self.prepared: dict[str, str | None] = {}
        self.loads: list[float] = []
        self.count = 0
        os.makedirs(config.out, exist_ok=True)
        os.makedirs(config.scratch, exist_ok=True)
        self.records = open(os.path.join(config.out, "results.jsonl"), "w")

    def record(self, kind: str, **fields) -> None:
        self.records.write(json.dumps({"kind": kind, **fields}, default=str) + "\n")
        self.records.flush()

    def child(self, side: Side, step: Step, scenario: str, round_no: int | None) -> dict:
        self.count += 1
        tag = f"{self.count:04d}-{scenario}-{side.name}-{step.phase}"
        result = run_child(side, step.phase, step.args, self.workspace, tag, self.config.timeout_s)
        self.loads.append(result["loadavg_1m"])
        self.record(
            "child",
            scenario=scenario,
            side=side.name,
            round=round_no,
            phase=step.phase,
            args=step.args,
            python=side.python,
            result=result,
        )
        status = f"ERROR {result['error'][:120]}" if "error" in result else "ok"
        where = f"round {round_no}" if round_no else "prep"
        _say(f"{scenario} {where} {side.name:4} {step.phase}: {result['wall_s']:.1f}s {status}")
        return result

    def about(self) -> dict:
        found = {}
        for side in self.sides:
            result = self.child(side, Step("about"), "about", None)
            found[side.name] = result
            detail = result.get("error") or (
                f"streaming {result.get('streaming_version')} from {result.get('streaming_path')}"
            )
            _say(f"{side.name}: {side.python} (PYTHONPATH={side.pythonpath or '-'}): {detail}")
        return found

    def missing_in_ours(self, scenarios: list[Scenario]) -> dict[str, str]:
        """For each required public name, why ours lacks it (names ours has are left out)."""
        names = sorted({name for s in scenarios for name in s.requires})
        if not names:
            return {}
        result = self.child(self.config.ours, Step("probe", {"names": names}), "probe", None)
        if "error" in result:
            return {name: f"probe failed: {result['error']}" for name in names}
        return {name: why for name, why in result["found"].items() if why is not True}

    def prepare(self, scenario: Scenario) -> str | None:
        """Run the scenario's prep steps (each once per run); return an error message or None."""
        for step in scenario.prep:
            if step.key not in self.prepared:
                result = self.child(self.config.ref, step, scenario.name, None)
                error = result.get("error")
                self.prepared[step.key] = f"prep {step.phase} failed: {error}" if error else None
            if self.prepared[step.key]:
                return self.prepared[step.key]
        return None

    def measure(self, scenario: Scenario) -> list[report.Row]:
        failure = self.prepare(scenario)
        if failure:
            return report.summarize(scenario, {s.name: [{"error": failure}] for s in self.sides})
        results: dict[str, list[dict]] = {s.name: [] for s in self.sides}
        rounds = min(self.config.rounds, scenario.max_rounds or self.config.rounds)
        for round_no in range(1, rounds + 1):
            for side in self.sides:
                results[side.name].append(self._side_round(side, scenario, round_no))
            if scenario.physical is not None:
                results.setdefault("physical", []).append(
                    self.child(self.physical, scenario.physical, scenario.name, round_no)
                )
        return report.summarize(scenario, results)

    def _side_round(self, side: Side, scenario: Scenario, round_no: int) -> dict:
        *setup, measured = scenario.steps
        for step in setup:
            result = self.child(side, step, scenario.name, round_no)
            if "error" in result:
                return {"error": f"setup {step.phase} failed: {result['error']}"}
        return self.child(side, measured, scenario.name, round_no)

    def close(self) -> None:
        self.records.close()
        if not self.config.keep_scratch:
            shutil.rmtree(self.config.scratch, ignore_errors=True)


def run(config: Config, scenarios: list[Scenario], explicit: set[str]) -> tuple[list[report.Row], list[float]]:
    """Measure the scenarios; gated ones run only if requested by name or ours has their API.
    Returns the table rows and the load average seen at the start of each child."""
    bench = BenchRun(config)
    try:
        bench.record(
            "run",
            scale=config.scale,
            rounds=config.rounds,
            only=config.only,
            scenarios=[s.name for s in scenarios],
            about=bench.about(),
        )
        gated = [s for s in scenarios if s.gated and s.name not in explicit]
        missing = bench.missing_in_ours(gated)
        rows = []
        for scenario in scenarios:
            lacking = [n for n in scenario.requires if n in missing] if scenario in gated else []
            if lacking:
                scenario_rows = report.skipped(scenario, f"ours lacks {', '.join(lacking)}")
            else:
                scenario_rows = bench.measure(scenario)
            for row in scenario_rows:
                bench.record("row", **row.as_json())
            rows.extend(scenario_rows)
        return rows, bench.loads
    finally:
        bench.close()


def main(argv: list[str] | None = None) -> int:
    config, list_only = parse_config(sys.argv[1:] if argv is None else argv, dict(os.environ))
    everything = catalogue(config.scale)
    if list_only:
        for s in everything:
            gate = f"(runs when ours has: {', '.join(s.requires)})" if s.gated else ""
            print(f"{s.name:24} {s.group:8} {gate}".rstrip())
        return 0
    try:
        scenarios, explicit = select(everything, config.only)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    started = time.perf_counter()
    _say(f"{len(scenarios)} scenarios, scale {config.scale}, {config.rounds} rounds; output in {config.out}")
    rows, loads = run(config, scenarios, explicit)
    table = report.render(rows)
    if loads:
        table += (
            f"\n\n1-minute load average at child starts: {min(loads):.1f} to {max(loads):.1f}"
            f" (median {statistics.median(loads):.1f}) on {os.cpu_count()} CPUs"
        )
    with open(os.path.join(config.out, "table.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    elapsed = time.perf_counter() - started
    _say(f"done in {elapsed:.0f}s; table.md and results.jsonl in {config.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
