"""A Spark table into PyTorch training, side by side: this package, petastorm, Ray Data, MosaicML Streaming.

    python benchmarks/tabular_bench.py [--rows 1000000] [--rounds 2] [--epochs 3]
        [--petastorm-python .bench/petastorm/bin/python] [--ray-python .bench/ray/bin/python]
        [--reference-python .venv-ref/bin/python]

The table: ``--rows`` rows of 100 ``float32`` features and an ``int64`` label, made by Spark (``local[2]``), read
shuffled in batches of 4,096 by 2 workers. Every side runs in its own child process, the sides alternate round
after round, and each reports the rows/s of its warm epochs (the first, with worker start-up and the zstd shards'
one-time decompression, apart):

* ``ours``: ``StreamingDataLoader`` over ``StreamingDataset`` (batch reads, columns handed over in shared memory);
  also the CPU per batch of the main process and of the workers, and the workers' memory (USS) afterwards;
* ``ours-per-sample``: the same with ``STREAMING_BATCH_READS=0``: the per-sample path (a dict per row), for
  ``--limited-batches`` batches per epoch (it reads a few thousand rows a second here);
* ``ours-in-process``: ``StreamingDataset.iter_batches`` in one process, no DataLoader;
* ``bar`` (the physical reference): numpy's fancy-index gather (``numpy.take``) of the same rows, in the same
  order and batches, from the mapped shards, in one process: what moving those bytes costs here;
* ``petastorm``: ``make_spark_converter`` (timed: its conversion) and ``make_torch_dataloader`` (2 workers, row
  groups shuffled, a shuffling queue of one batch), in a side virtualenv (petastorm 0.13.1 runs only with pyarrow 12,
  numpy < 2 and pandas 2.2: `setup_side.sh`);
* ``ray``: Ray Data's ``iter_torch_batches`` over the same table written as Parquet by Spark (a local shuffle
  buffer of one batch), where Ray installs;
* ``reference``: MosaicML Streaming's (streaming-community 0.14.2) ``StreamingDataLoader`` over our dataset, for
  ``--limited-batches`` batches per epoch (at its rate a whole epoch would take many minutes).

Conversion times: ours (``dataframe_to_mds`` with default arguments), petastorm's converter, and Spark writing the
Parquet that Ray reads. Prints a table and one JSON line. Sides whose interpreter is missing are skipped, said so.
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
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FEATURES = 100
BATCH = 4096
WORKERS = 2
SEED = 27


# ---------------------------------------------------------------------------------------------- the table


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )


def table(spark: Any, rows: int) -> Any:
    """``rows`` rows of ``f00`` .. ``f99`` (float32, seeded) and ``label`` (int64, the row id), in 8 partitions."""
    columns = [f"CAST(rand({SEED + i}) AS FLOAT) AS f{i:02d}" for i in range(FEATURES)]
    return spark.range(0, rows, 1, 8).selectExpr(*columns, "id AS label")


def make_data(scratch: str, rows: int) -> dict[str, float]:
    """Our dataset and the Parquet copy, each timed (the parent runs this with the project's interpreter)."""
    sys.path.insert(0, ROOT)
    from streaming.spark import dataframe_to_mds

    spark = spark_session()
    frame = table(spark, rows)
    frame.count()  # the plan compiled and the JVM warm before either clock starts
    start = time.perf_counter()
    dataframe_to_mds(frame, os.path.join(scratch, "mds"), progress=False)
    ours = time.perf_counter() - start
    start = time.perf_counter()
    frame.write.parquet(os.path.join(scratch, "parquet"))
    parquet = time.perf_counter() - start
    spark.stop()
    return {"ours_convert_s": ours, "parquet_write_s": parquet}


# ---------------------------------------------------------------------------------------------- child side


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0  # a child that has exited
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> list[int]:
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as children:
                pids.extend(int(pid) for pid in children.read().split())
        except FileNotFoundError:
            continue  # a thread that ended meanwhile (Ray starts and ends many)
    return pids


def _rows(batch: Any) -> tuple[int, int]:
    """Rows in a batch and the sum of its labels (every side must read every row once per epoch)."""
    if isinstance(batch, dict) and "label" in batch:
        labels = batch["label"]
    else:  # a tuple or a numpy batch
        labels = batch[-1] if isinstance(batch, (list, tuple)) else batch["label"]
    return len(labels), int(labels.sum())


class _Bar:
    """The physical reference: ``numpy.take`` of each batch's rows, in our epoch's order, from the mapped shards."""

    def __init__(self, data: str) -> None:
        sys.path.insert(0, ROOT)
        import numpy as np

        from streaming import StreamingDataset
        from streaming.dataset.share import WorkerShare

        dataset = StreamingDataset(local=data, batch_size=BATCH, shuffle=True)
        sample_ids, _, _ = dataset._epoch_work()
        shard_ids, indices = WorkerShare(sample_ids, dataset.sample_offset_per_shard).take(len(sample_ids))
        self.plan = [(shard_ids[s : s + BATCH], indices[s : s + BATCH]) for s in range(0, len(indices), BATCH)]
        self.records = []
        for shard in range(dataset.num_shards):
            gather, view = dataset.readers[shard].batch_view()
            self.records.append(view.records)
        self.label = (gather.offsets["label"], np.dtype("<i8"))

    def __iter__(self) -> Any:
        import numpy as np

        offset, dtype = self.label
        for shard_ids, indices in self.plan:
            rows = np.empty((len(indices), self.records[0].shape[1]), np.uint8)
            for shard in np.unique(shard_ids):
                chosen = np.flatnonzero(shard_ids == shard)
                rows[chosen] = np.take(self.records[shard], indices[chosen], axis=0)
            yield {"label": rows[:, offset : offset + 8].copy().view(dtype).reshape(-1)}


LIMITED = ("ours-per-sample", "reference")


def _loader(side: str, data: str, limited_batches: int) -> Any:
    if side == "bar":
        return _Bar(data)
    if side == "petastorm":
        return _petastorm(data)
    if side == "ray":
        return _ray(data)
    import streaming

    dataset = streaming.StreamingDataset(local=data, batch_size=BATCH, shuffle=True)
    if side == "ours-in-process":
        return _Repeat(lambda: dataset.iter_batches())
    loader = streaming.StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True)
    if side in LIMITED:
        limited = _Repeat(lambda: _first(loader, limited_batches))
        limited._worker_batches = getattr(loader, "_worker_batches", None)  # type: ignore[attr-defined]
        limited._loader = loader  # type: ignore[attr-defined]
        return limited
    return loader


class _Repeat:
    def __init__(self, make: Any) -> None:
        self.make = make

    def __iter__(self) -> Any:
        return iter(self.make())


def _first(loader: Any, batches: int) -> Any:
    for number, batch in enumerate(loader):
        if number == batches:
            return
        yield batch


def _petastorm(parquet_cache: str) -> Any:
    from petastorm.spark import SparkDatasetConverter, make_spark_converter

    spark = spark_session()
    spark.conf.set(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file://" + parquet_cache)
    frame = table(spark, int(os.environ["BENCH_ROWS"]))
    frame.count()
    start = time.perf_counter()
    converter = make_spark_converter(frame)
    convert_s = time.perf_counter() - start

    class Loader:
        conversion_s = convert_s

        def __iter__(self) -> Any:
            with converter.make_torch_dataloader(
                batch_size=BATCH, num_epochs=1, workers_count=WORKERS, shuffling_queue_capacity=BATCH
            ) as loader:
                yield from loader

    return Loader()


def _ray(parquet: str) -> Any:
    import ray

    ray.init(num_cpus=WORKERS, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    dataset = ray.data.read_parquet(parquet).materialize()
    load_s = time.perf_counter() - start

    class Loader:
        conversion_s = load_s

        def __iter__(self) -> Any:
            return iter(dataset.iter_torch_batches(batch_size=BATCH, local_shuffle_buffer_size=BATCH))

    return Loader()


def child(side: str, data: str, epochs: int, limited_batches: int) -> dict[str, Any]:
    import warnings

    warnings.simplefilter("ignore")
    loader = _loader(side, data, limited_batches)
    runs = []
    for _ in range(epochs):
        main_cpu, wall = time.process_time(), time.perf_counter()
        before = {pid: _cpu_seconds(pid) for pid in _children()}
        rows = total = batches = 0
        for batch in loader:
            count, labels = _rows(batch)
            rows += count
            total += labels
            batches += 1
        wall = time.perf_counter() - wall
        main_cpu = time.process_time() - main_cpu
        workers_cpu = sum(_cpu_seconds(pid) - cpu for pid, cpu in before.items() if os.path.exists(f"/proc/{pid}"))
        runs.append(
            {
                "rows": rows,
                "rows_per_s": rows / wall,
                "main_cpu_us_per_batch": main_cpu / max(batches, 1) * 1e6,
                "workers_cpu_us_per_batch": workers_cpu / max(batches, 1) * 1e6,
                "label_sum": total,
            }
        )
    result: dict[str, Any] = {"side": side, "epochs": runs}
    if hasattr(loader, "conversion_s"):
        result["conversion_s"] = loader.conversion_s
    loader = getattr(loader, "_loader", loader)
    inner = getattr(loader, "_worker_batches", None)
    inner = loader if inner is None else inner
    workers = getattr(getattr(inner, "_iterator", None), "_workers", None)
    if workers and side.startswith("ours"):
        sys.path.insert(0, HERE)
        import memory_split

        figures = [memory_split.memory(worker.pid) for worker in workers]
        result["worker_uss_mb"] = max(figure["uss"] for figure in figures)
        result["worker_anon_uss_mb"] = max(figure["split"].get("anon", {}).get("Private", 0.0) for figure in figures)
    return result


# ---------------------------------------------------------------------------------------------- driver side


def _run_child(python: str, side: str, data: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    command = [python, os.path.abspath(__file__), "--child", side, data, "--epochs", str(args.epochs)]
    command += ["--limited-batches", str(args.limited_batches)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode:
        return {"side": side, "error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load() -> str:
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--limited-batches", type=int, default=25)
    parser.add_argument("--python", default=sys.executable, help="interpreter for our package")
    bench = os.path.join(ROOT, ".bench")
    for name, default in (
        ("reference", os.environ.get("BENCH_REF_PYTHON", os.path.join(ROOT, ".venv-ref", "bin", "python"))),
        ("petastorm", os.path.join(bench, "petastorm", "bin", "python")),
        ("ray", os.path.join(bench, "ray", "bin", "python")),
    ):
        parser.add_argument(f"--{name}-python", default=default)
    parser.add_argument("--scratch", default=None)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "DATA"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.epochs, args.limited_batches)))
        return

    scratch = args.scratch or tempfile.mkdtemp(prefix="tabular-bench-")
    record = os.path.join(scratch, "made.json")
    if os.path.exists(record):  # a kept scratch directory (--scratch): the data and its conversion times
        with open(record) as file:
            made = json.load(file)
    else:
        start = time.perf_counter()
        made = make_data(scratch, args.rows)
        print(f"data made in {time.perf_counter() - start:.0f} s: {made}", file=sys.stderr)
        with open(record, "w") as file:
            json.dump(made, file)
    mds, parquet = os.path.join(scratch, "mds"), os.path.join(scratch, "parquet")
    ours_env = {**os.environ, "PYTHONPATH": ROOT, "BENCH_ROWS": str(args.rows)}
    foreign_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"BENCH_ROWS": str(args.rows)}
    sides: list[tuple[str, str, str, dict[str, str]]] = [
        ("ours", args.python, mds, ours_env),
        ("ours-per-sample", args.python, mds, {**ours_env, "STREAMING_BATCH_READS": "0"}),
        ("ours-in-process", args.python, mds, ours_env),
        ("bar", args.python, mds, ours_env),
    ]
    skipped = []
    for side, python, data in (
        ("petastorm", args.petastorm_python, os.path.join(scratch, "petastorm-cache")),
        ("ray", args.ray_python, parquet),
        ("reference", args.reference_python, mds),
    ):
        if os.path.exists(python):
            # petastorm's converter runs Spark (pyspark 3.5 of its venv): its Python workers are that venv's too.
            sides.append((side, python, data, foreign_env | {"PYSPARK_PYTHON": python}))
        else:
            skipped.append(f"{side} ({python} missing)")
    results: dict[str, list[dict[str, Any]]] = {side: [] for side, *_ in sides}
    loads = [_load()]
    for _ in range(args.rounds):
        for side, python, data, env in sides:
            results[side].append(_run_child(python, side, data, args, env))
            print(f"{side}: {json.dumps(results[side][-1])[-1500:]}", file=sys.stderr)
        loads.append(_load())
    summary = _summarise(results, args.rows)
    _print_table(summary, made, loads, skipped, args)
    print(json.dumps({"summary": summary, "made": made, "load": loads, "skipped": skipped, "raw": results}))
    if not args.scratch:
        shutil.rmtree(scratch, ignore_errors=True)


def _summarise(results: dict[str, list[dict[str, Any]]], rows: int) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for side, runs in results.items():
        good = [run for run in runs if "epochs" in run]
        if not good:
            summary[side] = {"error": runs[-1].get("error", "")[-500:]}
            continue
        warm = [epoch for run in good for epoch in run["epochs"][1:]] or [run["epochs"][0] for run in good]
        complete = side in LIMITED or all(epoch["rows"] == rows for run in good for epoch in run["epochs"])
        summary[side] = {
            "rows_per_s": statistics.median(epoch["rows_per_s"] for epoch in warm),
            "best_rows_per_s": max(epoch["rows_per_s"] for epoch in warm),
            "first_epoch_rows_per_s": statistics.median(run["epochs"][0]["rows_per_s"] for run in good),
            "main_cpu_us_per_batch": statistics.median(epoch["main_cpu_us_per_batch"] for epoch in warm),
            "workers_cpu_us_per_batch": statistics.median(epoch["workers_cpu_us_per_batch"] for epoch in warm),
            "every_row_once": complete,
        }
        for key in ("conversion_s", "worker_uss_mb", "worker_anon_uss_mb"):
            if key in good[0]:
                summary[side][key] = statistics.median(run[key] for run in good)
    return summary


def _print_table(
    summary: dict[str, dict[str, Any]],
    made: dict[str, float],
    loads: list[str],
    skipped: list[str],
    args: argparse.Namespace,
) -> None:
    print(
        f"{args.rows:,} rows x {FEATURES} float32 + int64 label, batch {BATCH}, {WORKERS} workers, shuffled; "
        f"load average: {' -> '.join(loads)}"
    )
    bar = summary.get("bar", {}).get("rows_per_s")
    ours = summary.get("ours", {}).get("rows_per_s")
    print(
        f"{'side':16} {'rows/s':>12} {'best':>12} {'1st epoch':>12} {'x/bar':>7} {'ours/x':>8} {'main µs/b':>10} "
        f"{'workers µs/b':>12} {'worker USS MB':>14}"
    )
    for side, row in summary.items():
        if "error" in row:
            print(f"{side:16} failed: {row['error'][-300:]}")
            continue
        rate = row["rows_per_s"]
        print(
            f"{side:16} {rate:12,.0f} {row['best_rows_per_s']:12,.0f} {row['first_epoch_rows_per_s']:12,.0f} "
            f"{rate / bar if bar else float('nan'):7.2f} {ours / rate if ours else float('nan'):8.1f} "
            f"{row['main_cpu_us_per_batch']:10,.0f} {row['workers_cpu_us_per_batch']:12,.0f} "
            f"{row.get('worker_uss_mb', float('nan')):14.1f}{'' if row['every_row_once'] else '  (rows missing!)'}"
        )
    conversions = {
        "ours (dataframe_to_mds)": made["ours_convert_s"],
        "Spark Parquet (Ray's input)": made["parquet_write_s"],
    }
    for side in ("petastorm", "ray"):
        if "conversion_s" in summary.get(side, {}):
            label = "petastorm make_spark_converter" if side == "petastorm" else "Ray read_parquet + materialize"
            conversions[label] = summary[side]["conversion_s"]
    print("conversion s: " + ", ".join(f"{name} {seconds:.1f}" for name, seconds in conversions.items()))
    for line in skipped:
        print(f"skipped: {line}")


if __name__ == "__main__":
    main()
