"""A `StreamingDataset` over a Delta table, and over a folder of Parquet files, in remote storage: S3 (the SeaweedFS
server), ``dbfs:/``, ``dbfs:/Volumes/...`` and a plain ``/Volumes/...`` path (the Databricks test server's DBFS and
Files APIs), each read where it lies, no copy but the stream's cache.

The table is Delta Lake on Spark's ``tests/fixtures/delta/v2_sidecars`` (partitions, deletion vectors, V2
checkpoints with sidecars; see ``make_tables.py`` there), uploaded as its writer left it; its oracle is Spark's rows
of each version, recorded beside it. The stream must yield exactly a version's rows, keep the files it read in its
``local`` folder (the data files' paths below the table), and stay within ``cache_limit``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import StreamingDataset
from streaming.storage.registry import storage_for
from tests.remote.conftest import remote_for
from tests.remote.test_delta_tables import FIXTURE, upload
from tests.remotes import Remote

SCHEMES = ["s3", "dbfs", "volumes", "plain-volumes"]
EXPECTED = json.loads(FIXTURE.with_name(FIXTURE.name + ".expected.json").read_text())


def _rows(dataset: StreamingDataset) -> Counter:
    return Counter((int(s["id"]), s["v"], s["p"]) for s in dataset)


def _cached(local: Path) -> list[str]:
    return sorted(path.relative_to(local).as_posix() for path in local.rglob("*.parquet"))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_delta_table_in_remote_storage_streams_a_pinned_version(
    scheme: str, remote_factory: Callable[[str], Remote], tmp_path
):
    url = remote_for(scheme, remote_factory).url("v2")
    upload(FIXTURE, url)
    newest = max(EXPECTED, key=int)
    dataset = StreamingDataset(remote=url, local=str(tmp_path / "c"), batch_size=2, shuffle=True)
    assert dataset.streams[0].version == int(newest)
    assert _rows(dataset) == Counter(tuple(row) for row in EXPECTED[newest])
    files = sorted(file.name for file in dataset.streams[0].pinned.files)
    assert _cached(tmp_path / "c") == files  # every file of the version, below the table's own paths
    older = StreamingDataset(
        remote=url, local=str(tmp_path / "o"), batch_size=2, stream_name="delta", stream_config={"version": 2}
    )
    assert _rows(older) == Counter(tuple(row) for row in EXPECTED["2"])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_parquet_folder_in_remote_storage_streams_within_the_cache_limit(
    scheme: str, remote_factory: Callable[[str], Remote], tmp_path
):
    url = remote_for(scheme, remote_factory).url("folder")
    source = tmp_path / "source"
    for part in range(6):
        pq.write_to_dataset(
            pa.table({"id": list(range(part * 50, (part + 1) * 50)), "k": [part % 2] * 50}),
            str(source),
            partition_cols=["k"],
            basename_template=f"part-{part}-{{i}}.parquet",
        )
    storage = storage_for(url)
    for path in sorted(source.rglob("*.parquet")):
        storage.put(str(path), f"{url}/{path.relative_to(source).as_posix()}")
    storage.put(str(next(source.rglob("*.parquet"))), f"{url}/_temporary/ignored.parquet")
    largest = max(os.path.getsize(path) for path in source.rglob("*.parquet"))
    limit = 4 * largest
    dataset = StreamingDataset(
        remote=url, local=str(tmp_path / "c"), batch_size=4, shuffle=True, shuffle_block_size=100, cache_limit=limit
    )
    assert dataset.shards_per_stream.tolist() == [6]
    samples = list(dataset)
    assert sorted(int(s["id"]) for s in samples) == list(range(300))
    assert all(int(s["k"]) == int(s["id"]) // 50 % 2 for s in samples)
    assert 0 < dataset.cache_usage <= limit
    cached = _cached(tmp_path / "c")
    assert cached and set(cached) <= {file.name for file in dataset.streams[0].pinned.files}
    assert sum(os.path.getsize(tmp_path / "c" / name) for name in cached) <= limit
