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

from streaming.format import commit_log
from streaming.format.commit_log import CHECKPOINT_INTERVAL, checkpoint_path, commit, publish_checkpoint
from streaming.storage.dataset_root import DatasetRoot
from tests.cli.conftest import run_cli
from tests.security.test_bounded import _peak_rss_growth

#: The most any bomb here may grow the reading process by.
GROWTH_LIMIT = 64 << 20


def _shard(name: str) -> dict:
    return {
        "column_encodings": ["int64"],
        "column_names": ["id"],
        "column_sizes": [8],
        "compression": None,
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": name, "bytes": 20, "hashes": {}},
        "samples": 1,
        "size_limit": 1 << 26,
        "version": 2,
        "zip_data": None,
    }


def _logged_dataset(path: str, commits: int) -> DatasetRoot:
    """A dataset of ``commits`` appends of one shard each, published (checkpoints every `CHECKPOINT_INTERVAL`)."""
    os.makedirs(path)
    root = DatasetRoot(path)
    state = commit_log.read_snapshot(root)
    for number in range(commits):
        with open(os.path.join(path, f"s{number}.mds"), "wb") as file:
            file.write(struct.pack("<IIIq", 1, 12, 20, number))  # one sample: its id
        state = commit(root, commit_log.APPEND, [_shard(f"s{number}.mds")], base=state)
        publish_checkpoint(root, state)
    return root


def test_a_commit_log_checkpoint_bomb_is_refused_before_it_is_decompressed(tmp_path):
    path = str(tmp_path / "ds")
    _logged_dataset(path, CHECKPOINT_INTERVAL + 2)
    entry = json.dumps(_shard("s0.mds"), sort_keys=True).encode()
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
