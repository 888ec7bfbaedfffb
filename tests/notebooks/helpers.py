"""Helpers of the notebook tests: small Delta tables written with deltalake, and datasets read back whole."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa

CDF = {"delta.enableChangeDataFeed": "true"}


def event_rows(start: int, stop: int) -> pa.Table:
    """Rows ``start .. stop - 1`` of the test events table: an id, a text and a small float array."""
    ids = list(range(start, stop))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "text": [f"event {i}" for i in ids],
            "score": pa.array([[i / 2, -i / 2] for i in ids], pa.list_(pa.float32())),
        }
    )


def write_events(path: Path, start: int, stop: int, *, change_data_feed: bool = False) -> int:
    """Append rows to the Delta table at ``path`` (creating it) and return the table's new version."""
    from deltalake import DeltaTable, write_deltalake

    exists = (path / "_delta_log").is_dir()
    write_deltalake(
        str(path),
        event_rows(start, stop),
        mode="append" if exists else "error",
        configuration=None if exists or not change_data_feed else CDF,
    )
    return DeltaTable(str(path)).version()


def dataset_ids(remote: str, cache: Path) -> list[int]:
    """Every sample id of the dataset at ``remote``, read through ``StreamingDataset``, sorted."""
    from streaming import StreamingDataset

    dataset = StreamingDataset(remote=remote, local=str(cache))
    return sorted(int(dataset[i]["id"]) for i in range(dataset.num_samples))


def assert_shards_written_as_indexed(dataset: Path) -> None:
    """Every shard ``index.json`` lists is on disk with the compressed size the index states."""
    index = json.loads((dataset / "index.json").read_text())
    written = files_below(dataset)
    for shard in index["shards"]:
        assert written[shard["zip_data"]["basename"]] == shard["zip_data"]["bytes"]


def files_below(root: Path) -> dict[str, int]:
    """Every file below ``root`` with its size, by ``/``-separated relative path."""
    found = {}
    for folder, _, names in os.walk(root, followlinks=True):
        for name in names:
            path = Path(folder) / name
            found[path.relative_to(root).as_posix()] = path.stat().st_size
    return found
