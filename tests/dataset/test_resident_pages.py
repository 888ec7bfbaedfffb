"""Iteration does not keep every shard page it has read mapped: resident shard memory stays a few MiB."""

from __future__ import annotations

import numpy as np

from streaming import MDSWriter, StreamingDataset

SAMPLES = 2048
SAMPLE_BYTES = 8192


def _resident_kib(path_part: str) -> int:
    """Resident KiB of this process's mappings of files whose path contains ``path_part`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                inside = len(fields) > 5 and path_part in fields[5]
            elif inside and fields[0] == "Rss:":
                total += int(fields[1])
    return total


def test_iterating_an_epoch_leaves_little_of_the_shards_resident(tmp_path):
    out = str(tmp_path / "tokens")
    with MDSWriter(out=out, columns={"tokens": "ndarray:uint8"}, size_limit=1 << 26) as writer:
        for i in range(SAMPLES):
            writer.write({"tokens": np.full(SAMPLE_BYTES, i % 251, np.uint8)})
    dataset = StreamingDataset(local=out, batch_size=32)
    kept = [sample["tokens"] for sample in dataset]  # zero-copy views into the mapping stay valid
    shard_kib = SAMPLES * SAMPLE_BYTES // 1024
    assert _resident_kib(out) < shard_kib // 4, "the pages read were released during the epoch"
    assert [int(tokens[0]) for tokens in kept] == [i % 251 for i in range(SAMPLES)]
    assert all(len(tokens) == SAMPLE_BYTES for tokens in kept)
