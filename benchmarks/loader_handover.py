"""DataLoader hand-over, side by side: 2 workers, batch 32, token samples, ours against the reference and LitData.

    python benchmarks/loader_handover.py [--samples 20000] [--rounds 3] [--epochs 3]
        [--reference-python .venv-ref/bin/python] [--litdata-python .bench/litdata/bin/python]

Each side runs in its own child process, the sides alternate round after round (the machine is shared: only
figures of one run compare), and every child reads the same 2048-token int32 samples:

* ``ours-sdl``: ``streaming.StreamingDataLoader`` (batches read as columns in the workers, handed over through a
  ring);
* ``ours-sdl-per-sample``: the same with ``STREAMING_BATCH_READS=0`` (samples read one by one, then collated);
* ``today``: ``ours-sdl`` as the package was before batch reads (commit ``BASELINE_COMMIT``, exported with
  ``git archive`` into ``.bench/``), the figure the batch-read targets are relative to;
* ``ours-sdl-torch``: the same with ``STREAMING_LOADER_HANDOVER=torch`` (torch's per-batch collation);
* ``ours-dataloader``: a plain ``torch.utils.data.DataLoader`` over our StreamingDataset;
* ``reference``: a plain DataLoader over streaming-community's StreamingDataset (its StreamingDataLoader is one);
* ``litdata``: ``litdata.StreamingDataLoader`` over ``litdata.StreamingDataset`` of the same samples
  (written by ``litdata.optimize``; needs a side venv with litdata and the CPU torch, see benchmarks/README.md);
* ``in-process``: our StreamingDataset iterated in one process, 32 samples to a "batch", no collation;
* ``numpy-gather``: the physical bar, numpy's fancy-index gather of each batch's token values from the mapped
  shards into one array, in one process: what moving those bytes costs on this machine at this moment.

Per side: samples/s of the warm epochs (persistent workers; the first epoch, with worker start-up, is reported
apart) and the CPU microseconds per batch spent by the main process and by the workers together, which is what
the hand-over costs whatever else runs on the machine. Sides whose interpreter is missing are skipped and said so.
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEQ_LEN = 2048
BATCH = 32
WORKERS = 2
# The package as it was before batch reads: "today's StreamingDataLoader" of issue 27.
BASELINE_COMMIT = "76376cf"


# ---------------------------------------------------------------------------------------------- child side


def token_sample(index: int) -> dict[str, Any]:
    """Sample ``index``: 2048 int32 token ids, the same on every side (the writers' ``fn``)."""
    import numpy as np

    return {"tokens": np.random.default_rng([20_480, index]).integers(0, 50_257, SEQ_LEN, dtype=np.int32)}


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> list[int]:
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as children:
            pids.extend(int(pid) for pid in children.read().split())
    return pids


def _loader(side: str, data: str) -> Any:
    if side == "litdata":
        import litdata

        dataset = litdata.StreamingDataset(data)
        return litdata.StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True)
    from torch.utils.data import DataLoader

    import streaming

    dataset = streaming.StreamingDataset(local=data, batch_size=BATCH)
    loader_class = streaming.StreamingDataLoader if side.startswith("ours-sdl") or side == "today" else DataLoader
    return loader_class(dataset, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True)


def _in_process(data: str) -> Any:
    """Lists of 32 samples read in this process: reading without collation or hand-over."""
    import itertools

    import streaming

    dataset = streaming.StreamingDataset(local=data, batch_size=BATCH)

    class Batches:
        def __iter__(self) -> Any:
            samples = iter(dataset)
            while batch := list(itertools.islice(samples, BATCH)):
                yield batch

    return Batches()


def _numpy_gather(data: str) -> Any:
    """Each batch's token values gathered from the mapped shards into one (32, 2048) array: the physical bar."""
    import glob
    import mmap

    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    width = SEQ_LEN * 4
    shards = []
    for path in sorted(glob.glob(os.path.join(data, "shard.*.mds"))):
        with open(path, "rb") as file:
            data_bytes = np.frombuffer(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
        count = int(data_bytes[:4].view("<u4")[0])
        offsets = data_bytes[4 : 4 * (count + 2)].view("<u4").astype(np.int64)
        # Each sample: its uint32 length, the ndarray shape header (1 byte + a uint16 dim), then the values.
        window = as_strided(data_bytes, (len(data_bytes) - width + 1, width), (1, 1), writeable=False)
        shards.append((window, offsets[:-1] + 7))

    class Batches:
        def __iter__(self) -> Any:
            for window, starts in shards:
                for first in range(0, len(starts), BATCH):
                    yield {"tokens": window[starts[first : first + BATCH]].view("<i4")}

    return Batches()


def _count(batch: Any) -> tuple[int, int]:
    """Samples in a batch and the sum of their first and last token ids."""
    if isinstance(batch, list):
        return len(batch), sum(int(sample["tokens"][0]) + int(sample["tokens"][-1]) for sample in batch)
    tokens = batch["tokens"]
    return len(tokens), int(tokens[:, 0].sum()) + int(tokens[:, -1].sum())


def child(side: str, data: str, epochs: int) -> dict[str, Any]:
    """Iterate ``epochs`` epochs; check every sample once per epoch; time and CPU per epoch."""
    import warnings

    warnings.simplefilter("ignore")  # torch's one-time warnings about read-only numpy arrays
    if side == "in-process":
        loader = _in_process(data)
    elif side == "numpy-gather":
        loader = _numpy_gather(data)
    else:
        loader = _loader(side, data)
    runs = []
    for _ in range(epochs):
        main_cpu, wall = time.process_time(), time.perf_counter()
        workers_before = {pid: _cpu_seconds(pid) for pid in _children()}
        samples = checksum = batches = 0
        for batch in loader:
            count, sums = _count(batch)
            samples += count
            checksum += sums
            batches += 1
        wall = time.perf_counter() - wall
        main_cpu = time.process_time() - main_cpu
        workers_cpu = sum(_cpu_seconds(pid) - before for pid, before in workers_before.items())
        runs.append(
            {
                "samples": samples,
                "samples_per_s": samples / wall,
                "main_cpu_us_per_batch": main_cpu / batches * 1e6,
                "workers_cpu_us_per_batch": workers_cpu / batches * 1e6,
                "checksum": checksum,
            }
        )
    return {"side": side, "epochs": runs}


def write_litdata(out: str, n: int) -> None:
    import litdata

    # litdata's workers are spawned: `fn` is found by import.
    sys.path.insert(0, HERE)
    from loader_handover import token_sample

    litdata.optimize(fn=token_sample, inputs=list(range(n)), output_dir=out, chunk_bytes="64MB", num_workers=1)


# ---------------------------------------------------------------------------------------------- driver side


def write_mds(out: str, n: int) -> None:
    sys.path.insert(0, ROOT)
    from streaming import MDSWriter

    with MDSWriter(out=out, columns={"tokens": "ndarray:int32"}) as writer:
        for index in range(n):
            writer.write(token_sample(index))


def run_child(
    python: str, side: str, data: str, epochs: int, env: dict[str, str], script: str = __file__
) -> dict[str, Any]:
    """Run ``script --child side data`` under ``python`` and return the JSON its last line prints."""
    command = [python, os.path.abspath(script), "--child", side, data, "--epochs", str(epochs)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode:
        raise RuntimeError(f"{side} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages, for a figure measured beside other work."""
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


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
    parser.add_argument(
        "--litdata-python",
        default=os.environ.get("BENCH_LITDATA_PYTHON", os.path.join(ROOT, ".bench", "litdata", "bin", "python")),
    )
    parser.add_argument("--scratch", default=None)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "DATA"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.epochs)))
        return

    scratch = args.scratch or tempfile.mkdtemp(prefix="loader-handover-")
    mds, lit = os.path.join(scratch, "mds"), os.path.join(scratch, "litdata")
    if not os.path.exists(os.path.join(mds, "index.json")):
        write_mds(mds, args.samples)
    ours_env = {**os.environ, "PYTHONPATH": ROOT}
    foreign_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    baseline = os.path.join(ROOT, ".bench", f"baseline-{BASELINE_COMMIT}")
    if not os.path.exists(os.path.join(baseline, "streaming")):
        os.makedirs(baseline, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", ROOT, "archive", "--format=tar", BASELINE_COMMIT], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", baseline], input=archive.stdout, check=True)
    sides: list[tuple[str, str, str, dict[str, str]]] = [
        ("numpy-gather", args.python, mds, ours_env),
        ("in-process", args.python, mds, ours_env),
        ("ours-sdl", args.python, mds, ours_env),
        ("ours-sdl-per-sample", args.python, mds, {**ours_env, "STREAMING_BATCH_READS": "0"}),
        ("today", args.python, mds, {**ours_env, "PYTHONPATH": baseline}),
        ("ours-sdl-torch", args.python, mds, {**ours_env, "STREAMING_LOADER_HANDOVER": "torch"}),
        ("ours-dataloader", args.python, mds, ours_env),
    ]
    skipped = []
    if os.path.exists(args.reference_python):
        sides.append(("reference", args.reference_python, mds, foreign_env))
    else:
        skipped.append(f"reference ({args.reference_python} missing)")
    if os.path.exists(args.litdata_python):
        if not os.path.exists(os.path.join(lit, "index.json")):
            command = [args.litdata_python, os.path.abspath(__file__), "--write-litdata", lit, str(args.samples)]
            subprocess.run(command, env=foreign_env, check=True, capture_output=True)
        sides.append(("litdata", args.litdata_python, lit, foreign_env))
    else:
        skipped.append(f"litdata ({args.litdata_python} missing)")

    results: dict[str, list[dict[str, Any]]] = {side: [] for side, *_ in sides}
    loads = [load_average()]
    for _ in range(args.rounds):
        for side, python, data, env in sides:
            results[side].append(run_child(python, side, data, args.epochs, env))
        loads.append(load_average())
    summary = _summarise(results)
    checksums = {epoch["checksum"] for runs in results.values() for run in runs for epoch in run["epochs"]}
    if len(checksums) != 1:
        raise SystemExit(f"the sides read different samples (checksums {sorted(checksums)})")
    _print_table(summary, loads, skipped)
    print(json.dumps({"summary": summary, "load": loads, "skipped": skipped, "raw": results}))


def _summarise(results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    summary = {}
    for side, runs in results.items():
        warm = [epoch for run in runs for epoch in run["epochs"][1:]] or [run["epochs"][0] for run in runs]
        first = [run["epochs"][0] for run in runs]
        summary[side] = {
            "samples_per_s": statistics.median(e["samples_per_s"] for e in warm),
            "best_samples_per_s": max(e["samples_per_s"] for e in warm),
            "first_epoch_samples_per_s": statistics.median(e["samples_per_s"] for e in first),
            "main_cpu_us_per_batch": statistics.median(e["main_cpu_us_per_batch"] for e in warm),
            "workers_cpu_us_per_batch": statistics.median(e["workers_cpu_us_per_batch"] for e in warm),
            "samples": warm[0]["samples"],
        }
    return summary


def _print_table(summary: dict[str, dict[str, float]], loads: list[str], skipped: list[str]) -> None:
    print(f"DataLoader {WORKERS} workers, batch {BATCH}, tokens; load average during the run: {' -> '.join(loads)}")
    header = f"{'side':16} {'samples/s':>10} {'best':>10} {'1st epoch':>10} {'main µs/b':>10} {'workers µs/b':>12}"
    print(header)
    for side, row in summary.items():
        print(
            f"{side:16} {row['samples_per_s']:10,.0f} {row['best_samples_per_s']:10,.0f} "
            f"{row['first_epoch_samples_per_s']:10,.0f} {row['main_cpu_us_per_batch']:10,.0f} "
            f"{row['workers_cpu_us_per_batch']:12,.0f}"
        )
    ours = summary.get("ours-sdl")
    for other in (
        "numpy-gather",
        "in-process",
        "today",
        "ours-sdl-per-sample",
        "ours-dataloader",
        "reference",
        "litdata",
    ):
        if ours and other in summary:
            ratio = ours["samples_per_s"] / summary[other]["samples_per_s"]
            cpu = (summary[other]["main_cpu_us_per_batch"] + summary[other]["workers_cpu_us_per_batch"]) / (
                ours["main_cpu_us_per_batch"] + ours["workers_cpu_us_per_batch"]
            )
            print(f"ours-sdl vs {other}: {ratio:.2f}x samples/s, {cpu:.2f}x less CPU per batch")
    for line in skipped:
        print(f"skipped: {line}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--write-litdata":
        write_litdata(sys.argv[2], int(sys.argv[3]))
    else:
        main()
