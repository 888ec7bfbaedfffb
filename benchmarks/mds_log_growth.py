"""The size of a dataset's commit log (``_mds_log``) after years-style runs: 1,000 hourly runs on a 100k-shard dataset.

Each run appends one shard and records the table version, as an hourly `incremental_to_mds` run does, through
`streaming.format.commit_log.commit` itself (the index checkpoint ``index.json`` is left out: it is rewritten in
place, not accumulated). The clock is simulated, one hour per run, so that ``vacuum`` with a 7-day retention sees
runs of a 6-week history. Reports the bytes of ``_mds_log`` after the runs, then after ``vacuum(retention="7d")``,
and the size the earlier format (every commit file holding the whole shard list) would have had.

    python benchmarks/mds_log_growth.py [--shards 100000] [--runs 1000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from unittest import mock

from streaming.format import commit_log
from streaming.format.vacuum import vacuum
from streaming.storage.dataset_root import DatasetRoot

HOUR = 3600.0


def shard_entry(number: int) -> dict:
    """An index entry as `incremental_to_mds` writes one (a zstd MDS shard in an increment folder)."""
    folder = (
        f"increments/v{number // 100:08d}-{number:08x}/20250101T000000Z-{number % 0xFFFFFF:06x}/part-00000-attempt-0"
    )
    return {
        "column_encodings": ["int64", "str", "ndarray:float32", "uint8"],
        "column_names": ["id", "text", "score", "text__is_null"],
        "column_sizes": [8, None, None, 1],
        "compression": "zstd",
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": f"{folder}/shard.00000.mds", "bytes": 67108000 + number % 997, "hashes": {}},
        "samples": 250000 + number % 1000,
        "size_limit": 67108864,
        "version": 2,
        "zip_data": {"basename": f"{folder}/shard.00000.mds.zstd", "bytes": 20100000 + number % 9973, "hashes": {}},
    }


def log_bytes(root: str) -> int:
    folder = os.path.join(root, commit_log.LOG_FOLDER)
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--out", default=None, help="where to build the dataset (default: a temporary folder)")
    args = parser.parse_args()
    root = args.out or tempfile.mkdtemp(prefix="mds-log-growth-")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    destination = DatasetRoot(root)
    clock = [time.time() - args.runs * HOUR]
    started = time.perf_counter()
    with mock.patch.object(time, "time", lambda: clock[0]):
        state = commit_log.commit(
            destination,
            commit_log.APPEND,
            [shard_entry(n) for n in range(args.shards)],
            base=commit_log.read_snapshot(destination),
            source_versions={"main.default.events": 0},
        )
        first = os.path.join(root, commit_log.commit_path(state.version))
        os.utime(first, (clock[0], clock[0]))  # the conversion that made the dataset, a run's length before
        whole_state_commit = len(json.dumps({"shards": state.shards, "metadata": state.metadata}))
        for run in range(1, args.runs + 1):
            clock[0] += HOUR
            record = {"run": f"run{run}", "method": "change_data_feed", "samples": 250000, "shards": 1}
            state = commit_log.commit(
                destination,
                commit_log.APPEND,
                [shard_entry(args.shards + run)],
                base=state,
                record=record,
                source_versions={"main.default.events": run},
            )
            path = os.path.join(root, commit_log.commit_path(state.version))
            os.utime(path, (clock[0], clock[0]))
            if state.version % commit_log.CHECKPOINT_INTERVAL == 0:
                checkpoint = os.path.join(root, commit_log.checkpoint_path(state.version))
                os.utime(checkpoint, (clock[0], clock[0]))
        written = time.perf_counter() - started
        after_runs = log_bytes(root)
        files = len(os.listdir(os.path.join(root, commit_log.LOG_FOLDER)))
        read_started = time.perf_counter()
        assert commit_log.read_snapshot(destination) == state
        read_seconds = time.perf_counter() - read_started
        vacuum(root, retention="7d")
        after_vacuum = log_bytes(root)
    remaining = len(os.listdir(os.path.join(root, commit_log.LOG_FOLDER)))
    result = {
        "shards": args.shards + args.runs,
        "runs": args.runs,
        "checkpoint_interval": commit_log.CHECKPOINT_INTERVAL,
        "log_bytes_after_runs": after_runs,
        "log_files_after_runs": files,
        "log_bytes_after_vacuum_7d": after_vacuum,
        "log_files_after_vacuum_7d": remaining,
        "earlier_format_bytes_estimate": whole_state_commit * (args.runs + 1),
        "seconds_for_the_runs": round(written, 1),
        "seconds_to_read_the_state": round(read_seconds, 2),
    }
    print(json.dumps(result, indent=2))
    if args.out is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
