"""A plain torch ``DataLoader`` over a ``StreamingDataset``, side by side: ours, the reference, an older commit.

    python benchmarks/plain_loader.py [--samples 20000] [--rounds 3] [--epochs 3]
        [--reference-python .venv-ref/bin/python] [--baseline COMMIT] [--profile SIDE]

What llm-foundry and composer do: ``torch.utils.data.DataLoader(StreamingDataset(local=...), batch_size=32,
num_workers=2)`` over 2048-token int32 samples, torch's own collation and hand-over. Sides, each in its own child
process, alternating round after round (only figures of one run compare on a shared machine):

* ``ours``: this checkout's package;
* ``baseline``: the package at ``--baseline`` (exported with ``git archive`` into ``.bench/``), for a regression;
* ``reference``: streaming-community 0.14.2 under ``--reference-python`` (skipped and said so when missing).

Per side: samples/s of the warm epochs (persistent workers; the first epoch, with worker start-up, apart) and
the CPU microseconds per batch of the main process and of the workers. ``--profile SIDE`` instead iterates that
side's dataset in one process for one epoch under cProfile (what a worker does per sample, without torch's
hand-over) and prints the top functions. Prints a table and one JSON line; exits 1 when ours is below ``--floor``
times the reference (default 0: report only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from loader_handover import BATCH, WORKERS, child, load_average, run_child, write_mds  # noqa: E402


def _loader(data: str) -> Any:
    from torch.utils.data import DataLoader

    import streaming

    dataset = streaming.StreamingDataset(local=data, batch_size=BATCH)
    return DataLoader(dataset, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True)


def profile(data: str) -> dict[str, Any]:
    """One epoch of the dataset in this process under cProfile: the per-sample path a worker runs."""
    import cProfile
    import io
    import pstats
    import time

    import streaming

    dataset = streaming.StreamingDataset(local=data, batch_size=BATCH)
    profiler = cProfile.Profile()
    wall = time.perf_counter()
    profiler.enable()
    samples = sum(1 for _ in dataset)
    profiler.disable()
    wall = time.perf_counter() - wall
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    return {"samples": samples, "seconds_under_profile": wall, "top": text.getvalue()}


def _export(commit: str) -> str:
    """The package at ``commit``, exported once into ``.bench/baseline-<commit>``."""
    where = os.path.join(ROOT, ".bench", f"baseline-{commit}")
    if not os.path.exists(os.path.join(where, "streaming")):
        os.makedirs(where, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", ROOT, "archive", "--format=tar", commit], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", where], input=archive.stdout, check=True)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--python", default=sys.executable, help="interpreter for our package")
    parser.add_argument(
        "--reference-python",
        default=os.environ.get("BENCH_REF_PYTHON", os.path.join(ROOT, ".venv-ref", "bin", "python")),
    )
    parser.add_argument("--baseline", default=None, help="a commit to measure beside this checkout")
    parser.add_argument("--profile", choices=("ours", "baseline", "reference"), default=None)
    parser.add_argument("--floor", type=float, default=0.0, help="fail below this ours/reference ratio")
    parser.add_argument("--scratch", default=None)
    parser.add_argument("--child", nargs=2, metavar=("ROLE", "DATA"))
    args = parser.parse_args()
    if args.child:
        role, data = args.child
        if role == "profile":
            print(json.dumps(profile(data)))
        else:
            # loader_handover's child: a plain DataLoader is its ``ours-dataloader`` / ``reference`` side.
            print(json.dumps(child("ours-dataloader", data, args.epochs)))
        return

    scratch = args.scratch or tempfile.mkdtemp(prefix="plain-loader-")
    try:
        _measure(args, os.path.join(scratch, "mds"))
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _measure(args: argparse.Namespace, data: str) -> None:
    """Write the samples once, run every side's rounds, print the table and the JSON line."""
    if not os.path.exists(os.path.join(data, "index.json")):
        write_mds(data, args.samples)
    environments = {"ours": {**os.environ, "PYTHONPATH": ROOT}}
    pythons = {"ours": args.python}
    skipped = []
    if args.baseline:
        environments["baseline"] = {**os.environ, "PYTHONPATH": _export(args.baseline)}
        pythons["baseline"] = args.python
    if os.path.exists(args.reference_python):
        environments["reference"] = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        pythons["reference"] = args.reference_python
    else:
        skipped.append(f"reference ({args.reference_python} missing)")

    if args.profile:
        if args.profile not in pythons:
            raise SystemExit(f"side {args.profile} is not available ({'; '.join(skipped) or 'no --baseline'})")
        result = run_child(pythons[args.profile], "profile", data, 1, environments[args.profile], script=__file__)
        print(result["top"])
        print(json.dumps({k: v for k, v in result.items() if k != "top"}))
        return

    results: dict[str, list[dict[str, Any]]] = {side: [] for side in pythons}
    loads = [load_average()]
    for _ in range(args.rounds):
        for side in pythons:
            results[side].append(run_child(pythons[side], side, data, args.epochs, environments[side], script=__file__))
        loads.append(load_average())
    checksums = {epoch["checksum"] for runs in results.values() for run in runs for epoch in run["epochs"]}
    if len(checksums) != 1:
        raise SystemExit(f"WRONG VALUES: the sides read different samples (checksums {sorted(checksums)})")
    summary = {}
    for side, runs in results.items():
        warm = [epoch for run in runs for epoch in run["epochs"][1:]] or [run["epochs"][0] for run in runs]
        summary[side] = {
            "samples_per_s": statistics.median(e["samples_per_s"] for e in warm),
            "best_samples_per_s": max(e["samples_per_s"] for e in warm),
            "first_epoch_samples_per_s": statistics.median(run["epochs"][0]["samples_per_s"] for run in runs),
            "main_cpu_us_per_batch": statistics.median(e["main_cpu_us_per_batch"] for e in warm),
            "workers_cpu_us_per_batch": statistics.median(e["workers_cpu_us_per_batch"] for e in warm),
        }
    print(f"plain torch DataLoader, {WORKERS} workers, batch {BATCH}, tokens; load average: {' -> '.join(loads)}")
    print(f"{'side':10} {'samples/s':>10} {'best':>10} {'1st epoch':>10} {'main µs/b':>10} {'workers µs/b':>12}")
    for side, row in summary.items():
        print(
            f"{side:10} {row['samples_per_s']:10,.0f} {row['best_samples_per_s']:10,.0f} "
            f"{row['first_epoch_samples_per_s']:10,.0f} {row['main_cpu_us_per_batch']:10,.0f} "
            f"{row['workers_cpu_us_per_batch']:12,.0f}"
        )
    ratios = {
        f"ours/{side}": summary["ours"]["samples_per_s"] / summary[side]["samples_per_s"]
        for side in summary
        if side != "ours"
    }
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.2f}x")
    for line in skipped:
        print(f"skipped: {line}")
    print(json.dumps({"summary": summary, "ratios": ratios, "load": loads, "skipped": skipped}))
    if args.floor and ratios.get("ours/reference", args.floor) < args.floor:
        raise SystemExit(f"ours is {ratios['ours/reference']:.2f}x the reference, below the floor {args.floor}x")


if __name__ == "__main__":
    main()
