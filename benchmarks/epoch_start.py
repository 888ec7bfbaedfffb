"""Epoch start at scale: construction, first sample and first batch over synthetic datasets of millions of samples.

Every dataset is one real MDS shard of 10,000 int64 samples (``--shard-samples``) hard-linked under every shard name
of an index that lists ``samples / 10,000`` shards, so only planning (the shard table, the epoch plan, the worker's
share) differs between sizes and sides. Each measurement runs in fresh processes; both sides read the same files.

Modes:

* ``sample``: ``StreamingDataset(local=..., shuffle=True, batch_size=32)`` in one process; construction time,
  time from construction to the first sample, peak RSS (``ru_maxrss``). ``--shuffle-algo`` picks another shuffle
  (then on one canonical node), here and in the ``loader`` and ``resume`` modes.
* ``loader``: the same dataset through ``StreamingDataLoader(batch_size=32, num_workers=2)`` on ``--ranks`` ranks
  of one node (one process per rank, ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` set as a
  launcher sets them); time to the first batch, and the peak RSS (``VmHWM``) of every rank and DataLoader worker.
* ``construct``: construction alone on ``--ranks`` ranks started together; each rank's time and peak RSS. With
  small shards (``--shard-samples 100``: 1,000,000 shards for 100M samples) this is the shard table's cost.
* ``resume``: as ``sample``, but from a checkpoint at ``--resume-at`` of the samples (default 0.9) of epoch 0:
  time from construction to the first sample after the position.
* ``order`` (ours only, no dataset read): for every shuffle algorithm (and none) on one canonical node, the
  epoch's order as the one reader of the node reads it, computed as it is read (`streamed_share`) when the
  algorithm has such an order, compared with the whole plan (`generate_work`) position for position, from the
  start and from ``--resume-at``; prints ``identical`` or the first difference, and both times.

Usage (the reference side needs a virtualenv with streaming-community 0.14.2, ``.venv-ref`` by default)::

    .venv/bin/python benchmarks/epoch_start.py --samples 10M 100M --modes sample loader
    .venv/bin/python benchmarks/epoch_start.py --samples 1B --modes loader --ranks 2 --sides ours
    .venv/bin/python benchmarks/epoch_start.py --samples 100M --shard-samples 100 --modes construct --ranks 2

Datasets are built once under ``--scratch`` (default ``.bench/epoch-start``) and kept for the next run.
Results: a table on stdout and one JSON line per measurement in ``--out`` (default
``<scratch>/results.jsonl``).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES_PER_SHARD = 10_000
BATCH_SIZE = 32
SUFFIXES = {"K": 10**3, "M": 10**6, "B": 10**9}


def parse_count(text: str, shard_samples: int = SAMPLES_PER_SHARD) -> int:
    """``10M`` -> 10,000,000; a multiple of the shard size."""
    scale = SUFFIXES.get(text[-1].upper(), 1)
    count = int(float(text[:-1] if text[-1].upper() in SUFFIXES else text) * scale)
    if count % shard_samples:
        raise SystemExit(f"--samples {text}: must be a multiple of {shard_samples} samples")
    return count


def build_dataset(scratch: Path, num_samples: int, python: str, shard_samples: int = SAMPLES_PER_SHARD) -> Path:
    """The synthetic dataset of ``num_samples`` samples in shards of ``shard_samples`` under ``scratch`` (built
    once, then reused)."""
    suffix = "" if shard_samples == SAMPLES_PER_SHARD else f"-per{shard_samples}"
    root = scratch / f"ds-{num_samples}{suffix}"
    if (root / "index.json").exists():
        return root
    template = scratch / f"template{suffix}"
    if not (template / "index.json").exists():
        shutil.rmtree(template, ignore_errors=True)
        # Written by whichever interpreter runs this script: both libraries write MDS identically.
        code = (
            "import sys, numpy as np; from streaming import MDSWriter\n"
            "with MDSWriter(out=sys.argv[1], columns={'x': 'int64'}, size_limit=1 << 30) as w:\n"
            f"    [w.write({{'x': np.int64(i)}}) for i in range({shard_samples})]\n"
        )
        subprocess.run([python, "-c", code, str(template)], check=True, env=_env_for(python))
    index = json.loads((template / "index.json").read_text())
    (entry,) = index["shards"]
    shard_file = template / entry["raw_data"]["basename"]
    building = Path(tempfile.mkdtemp(prefix=f"ds-{num_samples}.", dir=scratch))
    num_shards = num_samples // shard_samples
    shards = []
    source = shard_file
    for shard_id in range(num_shards):
        basename = f"shard.{shard_id:07d}.mds"
        try:
            os.link(source, building / basename)
        except OSError as error:
            # ext4 allows 65,000 links to a file: past that, a copy of the shard is linked from in turn.
            if error.errno != errno.EMLINK:
                raise
            shutil.copyfile(shard_file, building / basename)
            source = building / basename
        shards.append({**entry, "raw_data": {**entry["raw_data"], "basename": basename}})
    (building / "index.json").write_text(json.dumps({"version": 2, "shards": shards}))
    building.rename(root)
    return root


def _env_for(python: str) -> dict[str, str]:
    """The environment of a child: ours sees this checkout first; the reference never does."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    if python == OURS_PYTHON:
        env["PYTHONPATH"] = str(REPO)
    return env


OURS_PYTHON = sys.executable


# ---------------------------------------------------------------------------------------------- child side


def _peak_rss_of(pid: int) -> int:
    """A live process's peak resident set (``VmHWM``), bytes."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _children_of(parent: int) -> list[int]:
    """Live child processes of ``parent`` (the DataLoader's workers), from /proc: the reference's venv has no
    psutil."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            children.append(int(entry))
    return children


def _shuffle_settings() -> dict:
    """``--shuffle-algo``'s settings: the default (``py1e``) as is, another algorithm on one canonical node."""
    algo = os.environ.get("EPOCH_START_SHUFFLE_ALGO", "py1e")
    return {} if algo == "py1e" else {"shuffle_algo": algo, "num_canonical_nodes": 1}


def child_sample(local: str) -> dict:
    import resource

    from streaming import StreamingDataset

    start = time.perf_counter()
    dataset = StreamingDataset(local=local, shuffle=True, batch_size=BATCH_SIZE, **_shuffle_settings())
    constructed = time.perf_counter()
    first = next(iter(dataset))
    done = time.perf_counter()
    return {
        "construct_s": constructed - start,
        "first_sample_s": done - constructed,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "ok": "x" in first,
    }


def child_resume(local: str) -> dict:
    """From a checkpoint deep in epoch 0: the time to the first sample after it."""
    import resource

    from streaming import StreamingDataset

    start = time.perf_counter()
    dataset = StreamingDataset(local=local, shuffle=True, batch_size=BATCH_SIZE, **_shuffle_settings())
    at = int(len(dataset) * float(os.environ["EPOCH_START_RESUME_AT"])) // BATCH_SIZE * BATCH_SIZE
    state = {"epoch": 0, "sample_in_epoch": at, "num_canonical_nodes": 1, "shuffle_seed": dataset.shuffle_seed}
    dataset.load_state_dict({**state, "initial_physical_nodes": 1})
    constructed = time.perf_counter()
    first = next(iter(dataset))
    done = time.perf_counter()
    return {
        "construct_s": constructed - start,
        "first_sample_s": done - constructed,
        "resumed_at": at,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "ok": "x" in first,
    }


ORDER_ALGOS = ("py1e", "py1s", "py1br", "py2s", "naive", "none")


def child_order(local: str) -> dict:
    """Each algorithm's streamed order against the whole plan (``local`` is only named for the sample count)."""
    import numpy as np

    from streaming.dataset.batching import PlanInputs, generate_work
    from streaming.dataset.shuffle import default_shuffle_block_size
    from streaming.dataset.streamed_share import streamed_share
    from streaming.dataset.world import World

    num_samples = int(Path(local).name.split("-")[1])
    shard_samples = int(os.environ.get("EPOCH_START_SHARD_SAMPLES", SAMPLES_PER_SHARD))
    resume_at = int(num_samples * float(os.environ["EPOCH_START_RESUME_AT"]))
    world = World(1, 1, 1, 0)
    results = {}
    for algo in ORDER_ALGOS:
        plan = PlanInputs(
            samples_per_shard=np.full(num_samples // shard_samples, shard_samples, np.int64),
            shards_per_stream=[num_samples // shard_samples],
            choose_per_stream=[num_samples],
            proportion_per_stream=[1.0],
            epoch_size=num_samples,
            batch_size=BATCH_SIZE,
            num_canonical_nodes=1,
            shuffle=algo != "none",
            shuffle_algo="py1e" if algo == "none" else algo,
            shuffle_block_size=default_shuffle_block_size(1),
        )
        for at in (0, resume_at):
            clock = time.perf_counter()
            whole = generate_work("random", plan, world, 0, at).reshape(-1)
            whole_s = time.perf_counter() - clock
            clock = time.perf_counter()
            share = streamed_share(plan, world, 0, at)
            if share is None:
                results[f"{algo}@{at}"] = {"streamed": False, "whole_s": whole_s}
                continue
            first = share[0:BATCH_SIZE]
            first_s = time.perf_counter() - clock
            same = len(share) == len(whole) and np.array_equal(first, whole[:BATCH_SIZE])
            step = 1 << 22
            for begin in range(BATCH_SIZE, len(share), step):
                same = same and np.array_equal(share[begin : begin + step], whole[begin : begin + step])
            results[f"{algo}@{at}"] = {
                "streamed": True,
                "identical": bool(same),
                "whole_s": whole_s,
                "streamed_first_s": first_s,
                "streamed_all_s": time.perf_counter() - clock,
            }
            del whole
    return {"algorithms": results, "ok": all(r.get("identical", True) for r in results.values())}


def child_construct(local: str) -> dict:
    """Construction alone: where the shard table's cost shows (each rank's time and peak RSS)."""
    from streaming import StreamingDataset

    start = time.perf_counter()
    dataset = StreamingDataset(local=local, shuffle=True, batch_size=BATCH_SIZE)
    constructed = time.perf_counter()
    return {"construct_s": constructed - start, "peak_rss": _peak_rss_of(os.getpid()), "ok": len(dataset) > 0}


def child_loader(local: str) -> dict:
    from streaming import StreamingDataLoader, StreamingDataset

    start = time.perf_counter()
    dataset = StreamingDataset(local=local, shuffle=True, batch_size=BATCH_SIZE, **_shuffle_settings())
    constructed = time.perf_counter()
    loader = StreamingDataLoader(dataset, batch_size=BATCH_SIZE, num_workers=2)
    batches = iter(loader)
    batch = next(batches)
    done = time.perf_counter()
    worker_peaks = []
    for pid in _children_of(os.getpid()):
        try:
            worker_peaks.append(_peak_rss_of(pid))
        except OSError:
            pass
    result = {
        "construct_s": constructed - start,
        "first_batch_s": done - constructed,
        "peak_rss": _peak_rss_of(os.getpid()),
        "worker_peak_rss": worker_peaks,
        "ok": len(batch["x"]) == BATCH_SIZE,
    }
    del batches
    return result


# ---------------------------------------------------------------------------------------------- driver side


def run_child(python: str, mode: str, local: Path, ranks: int, timeout: float) -> dict:
    """One measurement: ``ranks`` processes of one node (rank 0 reports, every rank's figures are kept)."""
    shm_dir = tempfile.mkdtemp(prefix="epoch-start-")
    procs = []
    try:
        for rank in range(ranks):
            env = _env_for(python)
            if ranks > 1:
                env.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks))
                env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
            out = Path(shm_dir) / f"rank{rank}.json"
            command = [python, __file__, "--child", mode, "--local", str(local), "--child-out", str(out)]
            with open(Path(shm_dir) / f"rank{rank}.err", "w") as errors:
                procs.append((subprocess.Popen(command, env=env, stderr=errors), out))
        results = []
        deadline = time.monotonic() + timeout
        for rank, (proc, out) in enumerate(procs):
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return {"error": f"timed out after {timeout:.0f} s"}
            if proc.returncode:
                stderr = (Path(shm_dir) / f"rank{rank}.err").read_text().strip()
                return {"error": stderr.splitlines()[-1] if stderr else f"exit {proc.returncode}"}
            results.append(json.loads(out.read_text()))
        return {**results[0], "ranks": results}
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
        shutil.rmtree(shm_dir, ignore_errors=True)


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f} GB"


def describe(mode: str, result: dict) -> str:
    if "error" in result:
        return f"error: {result['error'][:120]}"
    if mode == "construct":
        ranks = result["ranks"]
        return ", ".join(
            f"rank {n}: construct {r['construct_s']:.2f} s, peak RSS {_gb(r['peak_rss'])}" for n, r in enumerate(ranks)
        )
    if mode == "order":
        return "; ".join(
            f"{name}: "
            + (
                f"{'identical' if r['identical'] else 'DIFFERENT'}, first ids {r['streamed_first_s']:.2f} s streamed "
                f"against {r['whole_s']:.2f} s whole"
                if r["streamed"]
                else f"whole plan only ({r['whole_s']:.2f} s)"
            )
            for name, r in result["algorithms"].items()
        )
    if mode == "resume":
        return (
            f"construct {result['construct_s']:.2f} s, first sample after {result['resumed_at']:,} in "
            f"{result['first_sample_s']:.2f} s, peak RSS {_gb(result['peak_rss'])}"
        )
    if mode == "sample":
        return (
            f"construct {result['construct_s']:.2f} s, first sample {result['first_sample_s']:.2f} s, "
            f"peak RSS {_gb(result['peak_rss'])}"
        )
    ranks = result["ranks"]
    rank_peak = max(r["peak_rss"] for r in ranks)
    worker_peak = max((p for r in ranks for p in r["worker_peak_rss"]), default=0)
    slowest = max(r["construct_s"] + r["first_batch_s"] for r in ranks)
    return (
        f"construct {max(r['construct_s'] for r in ranks):.2f} s, first batch {slowest:.2f} s after start, "
        f"peak RSS rank {_gb(rank_peak)} worker {_gb(worker_peak)} ({len(ranks)} ranks)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", nargs="+", default=["10M", "100M"])
    parser.add_argument(
        "--modes", nargs="+", default=["sample", "loader"], choices=["sample", "loader", "construct", "resume", "order"]
    )
    parser.add_argument("--sides", nargs="+", default=["ours", "ref"], choices=["ours", "ref"])
    parser.add_argument("--ranks", type=int, default=1, help="ranks of the one node in loader and construct modes")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--shard-samples",
        type=int,
        default=SAMPLES_PER_SHARD,
        help="samples per shard: 100 makes 100M samples 1,000,000 shards (the shard table at scale)",
    )
    parser.add_argument(
        "--ref-python", default=os.environ.get("MDS_REFERENCE_PYTHON", str(REPO / ".venv-ref/bin/python"))
    )
    parser.add_argument("--scratch", default=str(REPO / ".bench" / "epoch-start"))
    parser.add_argument("--out")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--shuffle-algo",
        default="py1e",
        help="sample, loader and resume modes: another algorithm, on one canonical node",
    )
    parser.add_argument("--resume-at", type=float, default=0.9, help="resume and order modes: where to resume")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--local", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        child = {
            "sample": child_sample,
            "loader": child_loader,
            "construct": child_construct,
            "resume": child_resume,
            "order": child_order,
        }[args.child]
        result = child(args.local)
        Path(args.child_out).write_text(json.dumps(result))
        return

    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    out = Path(args.out or scratch / "results.jsonl")
    pythons = {"ours": OURS_PYTHON, "ref": args.ref_python}
    for text in args.samples:
        num_samples = parse_count(text, args.shard_samples)
        local = build_dataset(scratch, num_samples, OURS_PYTHON, args.shard_samples)
        os.environ["EPOCH_START_RESUME_AT"] = str(args.resume_at)
        os.environ["EPOCH_START_SHUFFLE_ALGO"] = args.shuffle_algo
        os.environ["EPOCH_START_SHARD_SAMPLES"] = str(args.shard_samples)
        for mode in args.modes:
            for round_index in range(args.rounds):
                # Sides alternate within a round, so a busy machine weighs on both alike.
                for side in args.sides if mode != "order" else ["ours"]:
                    result = run_child(
                        pythons[side], mode, local, args.ranks if mode in ("loader", "construct") else 1, args.timeout
                    )
                    record = {
                        "samples": num_samples,
                        "shards": num_samples // args.shard_samples,
                        "mode": mode,
                        "side": side,
                        "round": round_index,
                        **result,
                    }
                    with out.open("a") as sink:
                        sink.write(json.dumps(record) + "\n")
                    print(f"{text:>5} {mode:<6} {side:<4} round {round_index}: {describe(mode, result)}", flush=True)


if __name__ == "__main__":
    main()
