"""Issue 34, attacks 2 to 5: every file the package decodes is bounded by what the dataset declares, checked
before the work (a commit-log checkpoint, a mirror's key map, a Delta checkpoint), and JSON nested too deep in a
Delta commit fails naming the table and the commit.

Each bomb is measured in a forked child (`_peak_rss_growth`): on the code before issue 34 each grew the process
by hundreds of MiB before anything refused it.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys

import pytest

from streaming.format import commit_log
from streaming.format.commit_log import CHECKPOINT_INTERVAL, checkpoint_path, commit, publish_checkpoint
from streaming.spark import incremental_to_mds
from streaming.storage.dataset_root import DatasetRoot
from tests.cli.conftest import run_cli
from tests.helpers import one_sample_shard
from tests.security.test_bounded import _peak_rss_growth

#: The most any bomb here may grow the reading process by.
GROWTH_LIMIT = 64 << 20


def _logged_dataset(path: str, commits: int) -> DatasetRoot:
    """A dataset of ``commits`` appends of one shard each, published (checkpoints every `CHECKPOINT_INTERVAL`)."""
    os.makedirs(path)
    root = DatasetRoot(path)
    state = commit_log.read_snapshot(root)
    for number in range(commits):
        with open(os.path.join(path, f"s{number}.mds"), "wb") as file:
            file.write(struct.pack("<IIIq", 1, 12, 20, number))  # one sample: its id
        state = commit(root, commit_log.APPEND, [one_sample_shard(f"s{number}.mds")], base=state)
        publish_checkpoint(root, state)
    return root


def test_a_commit_log_checkpoint_bomb_is_refused_before_it_is_decompressed(tmp_path):
    path = str(tmp_path / "ds")
    _logged_dataset(path, CHECKPOINT_INTERVAL + 2)
    entry = json.dumps(one_sample_shard("s0.mds"), sort_keys=True).encode()
    body = b'{"version": %d, "source_versions": {}, "shards": [' % CHECKPOINT_INTERVAL
    bomb = gzip.compress(body + b",".join([entry] * ((128 << 20) // len(entry))) + b"]}", compresslevel=9)
    assert len(bomb) < 1 << 20  # 128 MiB of JSON in less than a MiB
    with open(os.path.join(path, checkpoint_path(CHECKPOINT_INTERVAL)), "wb") as file:
        file.write(bomb)
    growth, outcome = _peak_rss_growth(lambda: run_cli("inspect", path, "--json"))
    assert outcome == "ok"
    assert growth < GROWTH_LIMIT, f"inspect grew by {growth >> 20} MiB reading a {len(bomb) >> 10} KiB checkpoint"
    code, report, _ = run_cli("inspect", path, "--json")
    assert code == 0 and report["shards"] == CHECKPOINT_INTERVAL + 2  # rebuilt from the commits instead


def _mirror_of(tmp_path, rows: int) -> tuple[str, str]:
    """A Delta table of ``rows`` ids (delta-rs) and its mirror, a few rows a shard."""
    import pyarrow as pa
    from deltalake import write_deltalake

    table, out = str(tmp_path / "table"), str(tmp_path / "out")
    ids = pa.table({"id": pa.array(range(rows), pa.int64()), "text": [f"row {i}" for i in range(rows)]})
    write_deltalake(table, ids, configuration={"delta.enableChangeDataFeed": "true"})
    _mirror(table, out)
    return table, out


def _growth_in_fresh_process(call: str) -> tuple[int, str]:
    """Peak RSS growth and outcome of ``call`` (Python source) in a fresh interpreter with the package imported
    (delta-rs's threads do not survive a fork, so `_peak_rss_growth` cannot run it)."""
    script = f"""
import json, resource, sys
from tests.security.test_bombs_round3 import _mirror
from streaming.spark import incremental_to_mds
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
outcome = "ok"
try:
    {call}
except Exception as err:
    outcome = f"{{type(err).__name__}}: {{err}}"
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps([(after - before) * 1024, outcome]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True)
    growth, outcome = json.loads(done.stdout.strip().splitlines()[-1])
    return growth, outcome


def _mirror(table: str, out: str):
    from streaming.spark import incremental_to_mds

    return incremental_to_mds(table, out, mode="mirror", key=["id"], size_limit=400, progress=False)


def test_a_key_map_bomb_is_refused_from_its_footer_before_it_is_read(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from streaming.convert import key_map

    table, out = _mirror_of(tmp_path, 200)
    state = commit_log.read_snapshot(DatasetRoot(out))
    [name] = key_map.mirror_record(state)["files"]
    rows = 8_000_000
    bomb = pa.table(
        {
            "key": pa.array([b"k" * 16], pa.binary()).take(pa.array([0] * rows)),
            "shard": pa.array([key_map.shard_id(state.shards[0])]).take(pa.array([0] * rows)),
            "sample": pa.array([0] * rows, pa.int64()),
        }
    )
    pq.write_table(bomb, os.path.join(out, name), compression="zstd", row_group_size=rows)
    del bomb
    assert os.path.getsize(os.path.join(out, name)) < 1 << 20
    DeltaTable(table).delete("id = 5")
    growth, outcome = _growth_in_fresh_process(f"_mirror({table!r}, {out!r})")
    assert growth < GROWTH_LIMIT, f"the mirror run grew by {growth >> 20} MiB reading a planted key map"
    assert "LogDamagedError" in outcome and name in outcome and "8000000 rows" in outcome, outcome


def test_a_key_map_is_compacted_once_deletes_leave_a_file_larger_than_the_dataset(tmp_path):
    """Most rows deleted: the next run writes the whole live map as one file, so no file holds more rows than the
    dataset has samples (what `key_map.load` checks), and the runs after it go on."""
    from deltalake import DeltaTable

    from streaming.convert import key_map

    table, out = _mirror_of(tmp_path, 100)
    DeltaTable(table).delete("id >= 10")
    _mirror(table, out)
    state = commit_log.read_snapshot(DatasetRoot(out))
    files = key_map.mirror_record(state)["files"]
    assert len(files) == 1 and key_map.load(DatasetRoot(out), files, state.shards).largest_file == 10
    DeltaTable(table).delete("id = 3")
    assert _mirror(table, out).removed == 1


def _deepen_commit_info(table: str, version: int) -> str:
    """Rewrite commit ``version`` of ``table`` with its ``commitInfo`` nested 5,000 deep; returns its file."""
    path = os.path.join(table, "_delta_log", f"{version:020d}.json")
    with open(path) as file:
        lines = file.read().splitlines()
    deep = "[" * 5000 + "]" * 5000
    out = []
    for line in lines:
        action = json.loads(line)
        if "commitInfo" in action:
            line = json.dumps(action)[:-2] + f', "deep": {deep}}}}}'
        out.append(line)
    with open(path, "w") as file:
        file.write("\n".join(out) + "\n")
    return path


def test_deep_json_in_a_delta_commit_fails_naming_the_table_and_the_commit(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    table, out = str(tmp_path / "table"), str(tmp_path / "out")
    write_deltalake(table, pa.table({"id": pa.array(range(10), pa.int64())}))
    incremental_to_mds(table, out, progress=False)
    write_deltalake(table, pa.table({"id": pa.array(range(10, 20), pa.int64())}), mode="append")
    _deepen_commit_info(table, 1)
    with pytest.raises(ValueError, match="00000000000000000001.json line 1 is not JSON Python can read") as info:
        incremental_to_mds(table, out, progress=False)
    assert table in str(info.value) and "nests too deeply" in str(info.value)


def test_a_delta_checkpoint_bomb_is_refused_from_its_footer_before_the_row_id_listing_reads_it(tmp_path):
    """A row-id mirror lists the table's files from its newest checkpoint; one of 2M identical ``add`` actions
    (a few KiB of Parquet) declares more actions than it has bytes, and is refused unread.

    Measured on the listing itself (`streaming.delta.log_replay.replay`); delta-rs's own opening of such a table:
    `test_delta_open_bomb_round3.py`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.incremental.row_tracked_table import TrackedTable

    table = TrackedTable(tmp_path / "events", [{"id": i, "name": f"user {i}"} for i in range(20)])
    table.delete({3})
    table.checkpoint(drop_commits=False)
    path = table.path / "_delta_log" / f"{table.version:020d}.checkpoint.parquet"
    actions = pq.read_table(path)
    adds = actions.filter(actions.column("add").is_valid())
    bomb = pa.concat_tables([actions, adds.take(pa.array([0] * 2_000_000))])
    pq.write_table(bomb, path, compression="zstd")
    del actions, adds, bomb
    assert path.stat().st_size < 1 << 20
    listing = (
        "from pyarrow.fs import LocalFileSystem, SubTreeFileSystem\n"
        "    from streaming.delta.log_replay import replay\n"
        f"    fs = SubTreeFileSystem({str(table.path)!r}, LocalFileSystem())\n"
        f"    replay(fs, lambda name: None, 'events', {table.version})"
    )
    growth, outcome = _growth_in_fresh_process(listing)
    assert growth < GROWTH_LIMIT, f"the row-id listing grew by {growth >> 20} MiB reading a planted checkpoint"
    assert "ParquetBoundsError" in outcome and "actions in" in outcome and path.name in outcome, outcome
