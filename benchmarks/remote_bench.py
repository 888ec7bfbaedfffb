"""Remote-storage benchmark: epochs streamed from a loopback S3 server, and uploading while writing.

Not a test. Run from the repository root (`BENCH_SCALE=0.1` for a quick look, ~4 min on a busy 2-core box):

    .venv/bin/python benchmarks/remote_bench.py

It starts SeaweedFS the way the test fixtures do (`tests/services.py`), writes the token dataset (1,000
shards of ~1 MB, `{'tokens': 'ndarray:int32'}` with 2,048 tokens a sample) to `s3://bench/tokens`, then
measures, each run in a fresh child process and the order rotating round by round, for each read setup
(`StreamingDataLoader(num_workers=1)`, `2`, `4`, and `2` under a `cache_limit` of a quarter of the dataset, which
forces eviction; `batch_size=32`):

* cold: one epoch of `StreamingDataLoader(StreamingDataset(remote=s3://..., local=<empty dir>))`, from constructing the
  dataset to the last batch, for ours and the reference;
* raw (the physical bar): bare boto3 `get_object` of the same shard objects into files, with as many connections
  as ours opens (workers x `PREPARE_THREADS`), listing not timed; "with start-up" also times its `import boto3`
  and client, which an epoch's clock includes;
* fetch only (ours): the package's download path without a consumer, `prepare_shard` of every shard on that many
  threads: what the storage and shard-cache code costs beside raw;
* with 2 workers also warm (a new process over the cache the cold epoch filled) and local (that cache read as a
  plain local dataset, `remote=None`): the consumer's own ceiling, which bounds a cold epoch too;
* write (`BENCH_ONLY=writes`): `MDSWriter(out="s3://...")` vs `MDSWriter(out=<local dir>)`, constructor to the end
  of `with`; then the finished local files uploaded with bare boto3 on 8 threads, the server's ingest ceiling.

Every read child also reports the CPU seconds of its timed part, its own (DataLoader workers included) and the
server's (`/proc/<pid>/stat` of the SeaweedFS process): the table's "cores busy" shows when an epoch is bound by
the machine's cores rather than by waiting. "after the 1st batch" is an epoch's rate without its start-up (the
SDK import, the index download, the workers' start); its prefetch threads fetch ahead meanwhile, so on a small
dataset that figure flatters.

`make bench` runs the reads at its `BENCH_SCALE` after the main benchmarks (`benchmarks/run.sh`).

"ours" is `BENCH_OURS_PYTHON` (default `.venv/bin/python`) with this repository on `PYTHONPATH`; "ref" is MosaicML
Streaming in `BENCH_REF_PYTHON` (default `.bench/ref/bin/python`, made by `benchmarks/setup_ref.sh`), left out when
it does not exist. Both get the server through `S3_ENDPOINT_URL` and `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`.
Every read checks that each sample arrived exactly once with its values. Children run in a private mount namespace
with their own `/dev/shm` (as `benchmarks/run.sh` does) because the reference's stale-memory cleanup would otherwise
unlink other processes' segments; without `unshare` the reference is skipped.

Settings: `BENCH_SCALE` (shard and sample counts, default 1), `BENCH_ROUNDS` (default 3),
`BENCH_ONLY` (`reads` or `writes`; both when unset),
`BENCH_REF_PYTHON`, `BENCH_SCRATCH` (default `.bench/tmp/remote-<pid>`, removed afterwards; not `.bench/scratch`, which
`benchmarks/bench.py` deletes as a whole),
`BENCH_TIMEOUT` (seconds per child, default 600). Figures are medians over the rounds; the table and a
JSON file go to `.bench/results/remote-<date-time>/`.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TOKENS = 2048
SHARD_BYTES = 1 << 20
SAMPLES_PER_SHARD = 127  # 2,048 int32 tokens plus the per-sample overhead: 127 fill a 1 MiB shard
SHARDS = 1000
BATCH_SIZE = 32
WORKERS = 2
BUCKET = "bench"
DATASET = f"s3://{BUCKET}/tokens"


# ---------------------------------------------------------------------------------------------- children
# These run under either interpreter; they import only `streaming` (whichever one is installed), numpy, torch.


def cpu_seconds() -> tuple[float, float, float]:
    """CPU seconds used so far by this process, by its reaped children (DataLoader workers), and by the storage
    server (`BENCH_SERVER_PID`; 0 without): on 2 cores shared with the server, whether an epoch is bound by CPU."""
    import resource

    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    server = 0.0
    pid = os.environ.get("BENCH_SERVER_PID")
    if pid:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime, server


def with_cpu(result: dict[str, Any], before: tuple[float, float, float]) -> dict[str, Any]:
    """`result` with the CPU seconds since `before` (a `cpu_seconds()`) of the client (workers included), of its
    workers alone, and of the server."""
    main, workers, server = (now - then for now, then in zip(cpu_seconds(), before))
    return dict(result, client_cpu_s=main + workers, workers_cpu_s=workers, server_cpu_s=server)


def read_epoch(
    remote: str | None, local: str, samples: int, workers: int = WORKERS, cache_limit: int | None = None
) -> dict[str, Any]:
    """One epoch through the package's StreamingDataLoader (both packages have one: upstream's is torch's DataLoader,
    ours hands batches over through shared memory); checks every sample id arrives once with its tokens."""
    import numpy as np

    from streaming import StreamingDataLoader, StreamingDataset

    cpu_before = cpu_seconds()
    started = time.perf_counter()
    dataset = StreamingDataset(
        remote=remote, local=local, batch_size=BATCH_SIZE, shuffle=False, cache_limit=cache_limit
    )
    loader = StreamingDataLoader(dataset, batch_size=BATCH_SIZE, num_workers=workers)
    ids, tokens_ok, first_batch = [], True, None
    for batch in loader:
        tokens = batch["tokens"]
        if first_batch is None:
            first_batch = time.perf_counter() - started
        tokens_ok = tokens_ok and bool((tokens[:, -1] - tokens[:, 0] == TOKENS - 1).all())
        ids.append(tokens[:, 0].numpy().copy())
    seconds = time.perf_counter() - started
    seen = np.sort(np.concatenate(ids)) if ids else np.zeros(0, np.int64)
    values_ok = tokens_ok and seen.size == samples and bool(np.array_equal(seen, np.arange(samples)))
    del loader  # its workers are reaped, so that their CPU time is counted
    result = {"seconds": seconds, "samples_per_s": seen.size / seconds, "first_batch_s": first_batch}
    return with_cpu(dict(result, values_ok=values_ok), cpu_before)


def raw_download(prefix: str, directory: str, samples: int, connections: int) -> dict[str, Any]:
    """The physical bar: bare boto3 `get_object` of every shard under `prefix` into files, `connections` threads.

    Listing the objects is not timed; each object is streamed into its own new file, as a shard cache does.
    `samples_per_s` is the dataset's sample count over that time, comparable with an epoch's. `startup_s` is what
    an epoch pays before its first request and this bar does not: importing boto3 and making the client.
    """
    import shutil as shell
    from concurrent.futures import ThreadPoolExecutor

    began = time.perf_counter()
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3", endpoint_url=os.environ["S3_ENDPOINT_URL"], config=Config(max_pool_connections=connections)
    )
    startup = time.perf_counter() - began
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/")
    keys = [item["Key"] for page in pages for item in page.get("Contents", []) if item["Key"].endswith(".mds")]
    os.makedirs(directory, exist_ok=True)

    def fetch(key: str) -> int:
        body = client.get_object(Bucket=BUCKET, Key=key)["Body"]
        with open(os.path.join(directory, key.rsplit("/", 1)[-1]), "wb") as file:
            shell.copyfileobj(body, file, 1 << 20)
            return file.tell()

    cpu_before = cpu_seconds()
    started = time.perf_counter()
    with ThreadPoolExecutor(connections) as pool:
        total = sum(pool.map(fetch, keys))
    seconds = time.perf_counter() - started
    result = {"seconds": seconds, "samples_per_s": samples / seconds, "mb_per_s": total / seconds / 1e6}
    return with_cpu(dict(result, files=len(keys), startup_s=startup), cpu_before)


def fetch_shards(remote: str, local: str, samples: int, connections: int) -> dict[str, Any]:
    """The package's download path alone: `StreamingDataset.prepare_shard` of every shard on `connections`
    threads, with nothing consuming samples (the counterpart of `raw_download`). Construction is not timed."""
    from concurrent.futures import ThreadPoolExecutor

    from streaming import StreamingDataset

    dataset = StreamingDataset(remote=remote, local=local, batch_size=BATCH_SIZE, shuffle=False)
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(dataset.prepare_shard, range(dataset.num_shards)))
    seconds = time.perf_counter() - started
    return with_cpu({"seconds": seconds, "samples_per_s": samples / seconds}, cpu_before)


def write_tokens(out: str, samples: int) -> dict[str, Any]:
    """Write `samples` token samples (uncompressed, ~1 MiB shards) to `out`; time constructor to finish."""
    import numpy as np

    from streaming import MDSWriter

    base = np.arange(TOKENS, dtype=np.int32)
    started = time.perf_counter()
    with MDSWriter(out=out, columns={"tokens": "ndarray:int32"}, size_limit=SHARD_BYTES) as writer:
        for sample_id in range(samples):
            writer.write({"tokens": base + sample_id})
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "samples_per_s": samples / seconds, "mb_per_s": samples * TOKENS * 4 / seconds / 1e6}


def upload_directory(directory: str, prefix: str) -> dict[str, Any]:
    """Upload every file of `directory` with bare boto3 on 8 threads: how fast this server takes the bytes."""
    from concurrent.futures import ThreadPoolExecutor

    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT_URL"])
    names = sorted(os.listdir(directory))
    total = sum(os.path.getsize(os.path.join(directory, name)) for name in names)
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(lambda name: client.upload_file(os.path.join(directory, name), BUCKET, f"{prefix}/{name}"), names)
        )
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "mb_per_s": total / seconds / 1e6}


def child_main(request: str) -> None:
    """Run one measurement described by the JSON `request`; print the result as the last stdout line."""
    job = json.loads(request)
    if job["kind"] == "read":
        result = read_epoch(job["remote"], job["local"], job["samples"], job["workers"], job.get("cache_limit"))
    elif job["kind"] == "fetch":
        result = fetch_shards(job["remote"], job["local"], job["samples"], job["connections"])
    elif job["kind"] == "raw":
        result = raw_download(job["prefix"], job["directory"], job["samples"], job["connections"])
    elif job["kind"] == "write":
        result = write_tokens(job["out"], job["samples"])
    else:
        result = upload_directory(job["directory"], job["prefix"])
    print(json.dumps(result), flush=True)


# ------------------------------------------------------------------------------------------ orchestrator


class _TempPaths:
    """The one method of pytest's TempPathFactory that the service fixtures use."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def mktemp(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=name, dir=self.base))


class Runner:
    """Starts children under an interpreter, in a private mount namespace with their own /dev/shm."""

    def __init__(self, scratch: Path, env: dict[str, str], timeout: float, pythonpaths: dict[str, str]) -> None:
        self.scratch = scratch
        self.env = env
        self.pythonpaths = pythonpaths
        self.timeout = timeout
        self.private = (
            subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode
            == 0
            if shutil.which("unshare")
            else False
        )
        self.log = scratch / "children.log"

    def run(self, python: str, job: dict[str, Any]) -> dict[str, Any]:
        argv = [python, str(Path(__file__).resolve()), "--child", json.dumps(job)]
        env = dict(self.env, PYTHONPATH=self.pythonpaths[python]) if self.pythonpaths.get(python) else self.env
        if self.private:
            mount = 'mount -t tmpfs -o size=4g,mode=1777 bench-shm /dev/shm && exec "$@"'
            argv = ["unshare", "--mount", "--propagation", "private", "bash", "-c", mount, "bash", *argv]
        done = subprocess.run(argv, cwd=self.scratch, env=env, capture_output=True, text=True, timeout=self.timeout)
        with open(self.log, "a") as log:
            log.write(f"$ {python} {json.dumps(job)}\n{done.stdout}{done.stderr}\n")
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            raise RuntimeError(f"child {job} under {python} failed with code {done.returncode}:\n{done.stderr[-3000:]}")
        return json.loads(lines[-1])


def _environment(server: Any, tmp: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "S3_", "PYTHON")) and name != "STREAMING_STATE_DIR"
    }
    env.update(
        AWS_ACCESS_KEY_ID=server.extra["key"],
        AWS_SECRET_ACCESS_KEY=server.extra["secret"],
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        S3_ENDPOINT_URL=server.endpoint,
        TMPDIR=str(tmp),
    )
    return env


def _summary(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    values = [run[key] for run in runs]
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "rounds": len(values),
        "values_ok": all(run.get("values_ok", True) for run in runs),
    }


@dataclass(frozen=True)
class ReadSetup:
    """One way of reading the dataset: DataLoader workers, and whether a cache limit forces eviction."""

    name: str
    workers: int
    evict: bool = False
    warm: bool = False


READ_SETUPS = (
    ReadSetup("w1", 1),
    ReadSetup("w2", 2, warm=True),
    ReadSetup("w4", 4),
    ReadSetup("w2-evict", 2, evict=True),
)


def eviction_limit(shards: int) -> int:
    """A cache limit of a quarter of the dataset (at least 8 shards): every epoch must evict."""
    return max(8, shards // 4) * (SHARD_BYTES + (64 << 10))


def measure_reads(
    runner: Runner, sides: dict[str, str], samples: int, rounds: int, connections_per_worker: int
) -> dict[str, list]:
    """Per setup and round: a cold epoch of each side and the bare boto3 download of the same objects with the
    same number of connections (workers x the prefetch threads of each), in an order that rotates every round."""
    shards = -(-samples // SAMPLES_PER_SHARD)
    results: dict[str, list] = {}
    for setup in READ_SETUPS:
        limit = eviction_limit(shards) if setup.evict else None
        connections = setup.workers * connections_per_worker
        for number in range(rounds):
            names = [*sides, "fetch", "raw"]
            shift = number % len(names)
            order = names[shift:] + names[:shift]
            caches = {side: runner.scratch / f"cache-{setup.name}-{side}-{number}" for side in names}
            for side in order:
                if side == "raw":
                    job = {
                        "kind": "raw",
                        "prefix": DATASET.split("/", 3)[3],
                        "directory": str(caches[side]),
                        "samples": samples,
                        "connections": connections,
                    }
                    result = runner.run(sides["ours"], job)
                    label = f"boto3 x{connections}"
                elif side == "fetch":
                    job = {"kind": "fetch", "remote": DATASET, "local": str(caches[side]), "samples": samples}
                    result = runner.run(sides["ours"], dict(job, connections=connections))
                    label = f"fetch x{connections}"
                else:
                    job = _read_job(DATASET, caches[side], samples, setup.workers, limit)
                    result = runner.run(sides[side], job)
                    label = side
                results.setdefault(f"{setup.name}/cold/{side}", []).append(result)
                _say_read(number, setup.name, "cold", label, result)
            if setup.warm:
                for side in order:
                    if side in ("raw", "fetch"):
                        continue
                    result = runner.run(sides[side], _read_job(DATASET, caches[side], samples, setup.workers))
                    results.setdefault(f"{setup.name}/warm/{side}", []).append(result)
                    _say_read(number, setup.name, "warm", side, result)
                result = runner.run(sides["ours"], _read_job(None, caches["ours"], samples, 2))
                results.setdefault(f"{setup.name}/local/ours", []).append(result)
                _say_read(number, setup.name, "local", "ours", result)
            for cache in caches.values():
                shutil.rmtree(cache, ignore_errors=True)
    return results


def _read_job(
    remote: str | None, local: Path, samples: int, workers: int, cache_limit: int | None = None
) -> dict[str, Any]:
    """A child job reading one epoch (`read_epoch`)."""
    return {
        "kind": "read",
        "remote": remote,
        "local": str(local),
        "samples": samples,
        "workers": workers,
        "cache_limit": cache_limit,
    }


def _say_read(number: int, setup: str, phase: str, label: str, result: dict[str, Any]) -> None:
    flag = "" if result.get("values_ok", True) else "  WRONG VALUES"
    print(
        f"  round {number + 1} {setup:<8} {phase:<5} {label:<10} {result['samples_per_s']:9.0f} samples/s{flag}",
        flush=True,
    )


def measure_writes(runner: Runner, python: str, samples: int, rounds: int) -> dict[str, list]:
    """Ours writing to a local directory vs to S3 (each to a fresh location), alternating which goes first."""
    results: dict[str, list] = {}
    for number in range(rounds):
        targets = {"local": str(runner.scratch / f"write-{number}"), "s3": f"s3://{BUCKET}/write-{number}"}
        order = ["local", "s3"] if number % 2 == 0 else ["s3", "local"]
        for target in order:
            result = runner.run(python, {"kind": "write", "out": targets[target], "samples": samples})
            results.setdefault(f"write/{target}", []).append(result)
            print(
                f"  round {number + 1} write to {target:<5} {result['seconds']:6.2f} s ({result['mb_per_s']:.0f} MB/s)",
                flush=True,
            )
        result = runner.run(python, {"kind": "upload", "directory": targets["local"], "prefix": f"bare-{number}"})
        results.setdefault("upload/bare-boto3", []).append(result)
        print(
            f"  round {number + 1} bare boto3 upload of those files {result['seconds']:6.2f} s "
            f"({result['mb_per_s']:.0f} MB/s)",
            flush=True,
        )
        shutil.rmtree(targets["local"], ignore_errors=True)
    return results


def _median(runs: list[dict[str, Any]] | None, key: str = "samples_per_s") -> float | None:
    return statistics.median(run[key] for run in runs) if runs else None


def _ratio(top: float | None, bottom: float | None) -> str:
    return f"{top / bottom:.2f}" if top and bottom else ""


def _with_startup(runs: list[dict[str, Any]], samples: int) -> float:
    """The bar's samples/s had its clock started before it imported boto3 and made its client, as an epoch's is."""
    return statistics.median(samples / (run["seconds"] + run["startup_s"]) for run in runs)


def _after_first_batch(runs: list[dict[str, Any]]) -> float:
    """Median samples/s from the first batch to the last: the epoch without its start-up (imports of the
    storage SDK, its client, the index download, the workers' start and their first shards)."""
    return statistics.median(
        (run["samples_per_s"] * run["seconds"] - BATCH_SIZE) / (run["seconds"] - run["first_batch_s"]) for run in runs
    )


def _cores(runs: list[dict[str, Any]] | None) -> str:
    """Median CPU cores busy during the timed part: all (client, workers and server), then the server's and the
    DataLoader workers' shares in brackets, e.g. "1.70 (0.43 / 1.05)"."""
    if not runs or "client_cpu_s" not in runs[0]:
        return ""

    def share(*keys: str) -> float:
        return statistics.median(sum(run[key] for key in keys) / run["seconds"] for run in runs)

    return f"{share('client_cpu_s', 'server_cpu_s'):.2f} ({share('server_cpu_s'):.2f} / {share('workers_cpu_s'):.2f})"


def _figure(runs: list[dict[str, Any]] | None) -> str:
    if not runs:
        return ""
    flag = "" if all(run.get("values_ok", True) for run in runs) else " WRONG VALUES"
    return f"{_median(runs):,.0f}{flag}"


def report(reads: dict[str, list], writes: dict[str, list], samples: int) -> str:
    shards = -(-samples // SAMPLES_PER_SHARD)
    lines = [
        f"Remote benchmark: {samples:,} samples of {TOKENS} int32 tokens in {shards:,} shards of ~1 MiB, loopback "
        f"SeaweedFS, DataLoader(batch_size={BATCH_SIZE}); medians of {len(next(iter(reads.values()), []))} rounds. "
        f"raw = bare boto3 get_object of the same shard objects into files, with as many connections as ours opens "
        f"(workers x prefetch threads); fetch only = ours' download path without a consumer "
        f"(`prepare_shard` of every shard on that many threads); local = the warm cache read with remote=None, the "
        f"bar the consumer sets; eviction: cache_limit {eviction_limit(shards) / 2**20:.0f} MiB. Cores busy: CPU "
        f"seconds of the client (DataLoader workers included) and the server over the timed part, per second, of "
        f"the {os.cpu_count()} this machine has; in brackets the server's share and the DataLoader workers' "
        f"(raw and fetch: 0, one process). 'raw with start-up': the bar's clock also runs while it imports boto3 "
        f"and makes its client, as an epoch's does (listing stays out: an epoch reads index.json instead).",
        "",
        "| setup | epoch | ours samples/s | ref samples/s | raw samples/s (MB/s) | ours/raw | ref/raw | ours/ref "
        "| ours fetch only | fetch/raw | ours/raw after the 1st batch | ours/raw with start-up "
        "| cores busy: ours | ref | raw |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for setup in READ_SETUPS:
        for phase in ("cold", "warm", "local"):
            ours, ref = reads.get(f"{setup.name}/{phase}/ours"), reads.get(f"{setup.name}/{phase}/ref")
            if not ours:
                continue
            raw = reads.get(f"{setup.name}/cold/raw") if phase == "cold" else None
            fetch = reads.get(f"{setup.name}/cold/fetch") if phase == "cold" else None
            raw_cell = f"{_median(raw):,.0f} ({_median(raw, 'mb_per_s'):,.0f})" if raw else ""
            lines.append(
                f"| {setup.name} | {phase} | {_figure(ours)} | {_figure(ref)} | {raw_cell} "
                f"| {_ratio(_median(ours), _median(raw))} | {_ratio(_median(ref), _median(raw))} "
                f"| {_ratio(_median(ours), _median(ref))} | {_figure(fetch)} | {_ratio(_median(fetch), _median(raw))} "
                f"| {_ratio(_after_first_batch(ours), _median(raw)) if phase == 'cold' else ''} "
                f"| {_ratio(_median(ours), _with_startup(raw, samples)) if raw else ''} "
                f"| {_cores(ours)} | {_cores(ref)} | {_cores(raw)} |"
            )
    if writes:
        lines += ["", "| write | median s | min | max | rounds |", "|---|---|---|---|---|"]
        for name, runs in writes.items():
            values = [run["seconds"] for run in runs]
            lines.append(
                f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} | {max(values):.2f} | {len(values)} |"
            )
        to_s3, to_local, bare = (
            _median(writes[name], "seconds") for name in ("write/s3", "write/local", "upload/bare-boto3")
        )
        lines.append("")
        lines.append(f"write to s3 / write to local dir: {to_s3 / to_local:.2f}x time (target <= 1.2x)")
        lines.append(
            f"write to s3 / bare boto3 upload of the finished files (the server's ceiling here): "
            f"{to_s3 / bare:.2f}x time"
        )
    return "\n".join(lines)


def main() -> None:
    sys.path.insert(0, str(REPO))
    from tests.services import seaweedfs

    scale = float(os.environ.get("BENCH_SCALE", "1"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
    timeout = float(os.environ.get("BENCH_TIMEOUT", "600"))
    only = os.environ.get("BENCH_ONLY", "")
    if only not in ("", "reads", "writes"):
        raise SystemExit(f"BENCH_ONLY={only!r}: choose 'reads', 'writes' or leave it unset for both.")
    from streaming.dataset.shard_cache import PREPARE_THREADS

    ours = os.environ.get("BENCH_OURS_PYTHON", str(REPO / ".venv" / "bin" / "python"))
    ref = os.environ.get("BENCH_REF_PYTHON", str(REPO / ".bench" / "ref" / "bin" / "python"))
    samples = max(1, round(SHARDS * scale)) * SAMPLES_PER_SHARD
    scratch = Path(os.environ.get("BENCH_SCRATCH", REPO / ".bench" / "tmp" / f"remote-{os.getpid()}"))
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "tmp").mkdir(exist_ok=True)
    server_fixture = seaweedfs.__wrapped__(_TempPaths(scratch))
    server = next(server_fixture)
    try:
        env = dict(_environment(server, scratch / "tmp"), BENCH_SERVER_PID=str(server.process.pid))
        runner = Runner(scratch, env, timeout, {ours: str(REPO)})
        sides = {"ours": ours}
        if not Path(ref).exists():
            print(f"No reference interpreter at {ref}: measuring ours only.")
        elif not runner.private:
            print(
                "No private mount namespace (unshare): the reference would clean other processes' shared "
                "memory, so it is left out."
            )
        else:
            sides = {"ref": ref, "ours": ours}
        os.environ.update({k: v for k, v in env.items() if k.startswith(("AWS_", "S3_"))})
        import boto3

        boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket=BUCKET)
        print(f"Writing {samples:,} samples to {DATASET} ...", flush=True)
        runner.run(ours, {"kind": "write", "out": DATASET, "samples": samples})
        reads: dict[str, list] = {}
        writes: dict[str, list] = {}
        load_at_start = os.getloadavg()
        if only in ("", "reads"):
            print("Reads:", flush=True)
            reads = measure_reads(runner, sides, samples, rounds, PREPARE_THREADS)
        if only in ("", "writes"):
            print("Writes:", flush=True)
            writes = measure_writes(runner, ours, samples, rounds)
        table = report(reads, writes, samples)
        table += f"\n\n1/5/15-minute load average at the end: {' / '.join(f'{v:.1f}' for v in os.getloadavg())} on "
        table += f"{os.cpu_count()} CPUs; at the start: {' / '.join(f'{v:.1f}' for v in load_at_start)}"
        print("\n" + table)
        out = REPO / ".bench" / "results" / time.strftime("remote-%Y%m%d-%H%M%S")
        out.mkdir(parents=True, exist_ok=True)
        (out / "table.md").write_text(table + "\n")
        (out / "results.json").write_text(
            json.dumps({"scale": scale, "samples": samples, "sides": sides, "reads": reads, "writes": writes}, indent=1)
        )
        print(f"\nSaved to {out}")
    finally:
        next(server_fixture, None)
        if "BENCH_SCRATCH" not in os.environ:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child_main(sys.argv[2])
    else:
        main()
