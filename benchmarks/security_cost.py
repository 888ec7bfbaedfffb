"""What reading through the security checks of issue 24 costs: mapped vs unmapped shards, and two code trees.

A shard another user owns is read with ``pread`` instead of a mapping (a truncated mapping is SIGBUS); every
shard file is opened through `LocalTree` (one ``openat`` per path component, ``O_NOFOLLOW``/``O_NONBLOCK``,
an ``fstat``). This script measures, in fresh processes and alternating rounds:

* ``LocalDataset``: ``ds[i]`` at random indices (median latency) and a full iteration (samples/s);
* ``StreamingDataset(local=...)``: one epoch's iteration (samples/s) and ``ds[i]`` at random indices;
* ``open``: constructing ``LocalDataset`` over many one-sample shards and reading one sample of each (the
  per-shard open cost, where the path walk shows if anywhere);

each over the same bytes owned by this user (mapped) and, when run as root, owned by ``nobody`` (unmapped).
Times are the process's CPU time (user and system: the syscalls of the unmapped path count), which a busy
shared machine disturbs far less than wall time; page faults of a cold mapping count as system time too.
``--compare PATH`` also runs every measurement with ``PATH`` first on ``PYTHONPATH`` (another checkout's
``streaming/``, e.g. the tree before the change) and prints both.

    .venv/bin/python benchmarks/security_cost.py --samples 200000 --rounds 5 [--compare /tmp/oldtree]
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

NOBODY = 65534

CHILD = r"""
import json, random, sys, time
kind, path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
from streaming import LocalDataset, StreamingDataset
out = {}
if kind == "local":
    ds = LocalDataset(path)
    ds[0]
    order = random.Random(0).sample(range(len(ds)), min(count, len(ds)))
    times = []
    for i in order:
        t = time.process_time(); ds[i]; times.append(time.process_time() - t)
    times.sort()
    out["random_us_p50"] = times[len(times) // 2] * 1e6
    t = time.process_time(); n = sum(1 for _ in ds); out["iter_per_s"] = n / (time.process_time() - t)
elif kind == "streaming":
    ds = StreamingDataset(local=path, batch_size=32)
    t = time.process_time(); n = sum(1 for _ in ds); out["iter_per_s"] = n / (time.process_time() - t)
    order = random.Random(0).sample(range(len(ds)), min(count, len(ds)))
    t = time.process_time()
    for i in order:
        ds[i]
    out["random_us_mean"] = (time.process_time() - t) / len(order) * 1e6
else:
    t = time.process_time(); ds = LocalDataset(path)
    for shard in range(len(ds.readers)):
        if ds.readers[shard].samples:  # size_limit=1 writes an empty first shard, as upstream does
            ds.readers[shard].get_item(0)
    out["open_us_per_shard"] = (time.process_time() - t) / len(ds.readers) * 1e6
print(json.dumps(out))
"""


def _write(path: str, samples: int, shards: int | None) -> None:
    from streaming import MDSWriter

    size_limit = 1 << 26 if shards is None else 1  # one sample per shard for the open measurement
    with MDSWriter(out=path, columns={"tokens": "ndarray:int32:64", "text": "str"}, size_limit=size_limit) as out:
        import numpy as np

        tokens = np.arange(64, dtype=np.int32)
        for i in range(samples if shards is None else shards):
            out.write({"tokens": tokens, "text": f"sample {i} " * 8})


def _owned_by_nobody(source: str, target: str) -> None:
    shutil.copytree(source, target)
    for folder, _, names in os.walk(target):
        os.chown(folder, NOBODY, NOBODY)
        for name in names:
            os.chown(os.path.join(folder, name), NOBODY, NOBODY)


def _run(kind: str, path: str, count: int, pythonpath: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, path, str(count)], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"{kind} over {path} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--open-shards", type=int, default=5000)
    parser.add_argument("--random", type=int, default=20_000, help="random reads per measurement")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compare", help="another checkout's folder holding streaming/, measured alternately")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="mds-security-cost-")
    os.chmod(scratch, 0o755)
    try:
        data, shards = os.path.join(scratch, "data"), os.path.join(scratch, "shards")
        _write(data, args.samples, None)
        _write(shards, 0, args.open_shards)
        # Both cases read copies made the same way (copytree), so only the owner differs between them.
        shutil.copytree(data, data + "-own")
        shutil.copytree(shards, shards + "-own")
        cases = [("mapped", data + "-own", shards + "-own")]
        if os.getuid() == 0:
            _owned_by_nobody(data, data + "-nobody")
            _owned_by_nobody(shards, shards + "-nobody")
            cases.append(("unmapped", data + "-nobody", shards + "-nobody"))
        trees = [("this tree", None)] + ([("compared", args.compare)] if args.compare else [])
        results: dict[tuple[str, str, str], list[float]] = {}
        for _ in range(args.rounds):
            for tree, pythonpath in trees:
                for case, path, many in cases:
                    for kind, where in (("local", path), ("streaming", path), ("open", many)):
                        for metric, value in _run(kind, where, args.random, pythonpath).items():
                            results.setdefault((tree, case, f"{kind} {metric}"), []).append(value)
        print(f"{'tree':<10} {'files':<9} {'measure':<28} {'median':>12}  (rounds: {args.rounds})")
        for (tree, case, metric), values in sorted(results.items()):
            print(f"{tree:<10} {case:<9} {metric:<28} {statistics.median(values):>12,.1f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
