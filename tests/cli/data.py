"""Small datasets for the command-line tests, written with the package's own writers."""

from __future__ import annotations

import numpy as np

from streaming import JSONWriter, MDSWriter

COLUMNS = {"id": "int64", "text": "str", "tokens": "ndarray:int32", "blob": "bytes"}


def sample(i: int) -> dict:
    return {
        "id": i,
        "text": f"sample {i}",
        "tokens": np.arange(1 + i % 17, dtype=np.int32),
        "blob": bytes([i % 256]) * 50,
    }


def write_mds(out: str, count: int = 300, compression: str | None = "zstd", hashes=("sha1", "xxh64")) -> None:
    """An MDS dataset of `count` samples in several shards (about 10 per 4 KiB shard)."""
    with MDSWriter(out=out, columns=COLUMNS, compression=compression, hashes=list(hashes), size_limit=4096) as writer:
        for i in range(count):
            writer.write(sample(i))


def write_json(out: str, count: int = 100) -> None:
    with JSONWriter(out=out, columns={"id": "int", "text": "str"}, hashes=["sha1"], size_limit=2048) as writer:
        for i in range(count):
            writer.write({"id": i, "text": f"sample {i}"})
