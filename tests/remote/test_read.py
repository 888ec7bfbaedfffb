"""StreamingDataset over every scheme: DataLoader epochs, the local cache, random access, eviction, errors."""

from __future__ import annotations

import collections
import os
import threading

import pytest
from torch.utils.data import DataLoader

from streaming import StreamingDataset
from streaming.storage import CredentialsError, storage_for
from streaming.storage.url import join_url
from tests.remote.data import (
    BATCH_SIZE,
    CREDENTIALS_MESSAGE,
    NUM_SAMPLES,
    assert_no_secret,
    check_sample,
    delete_remote,
    files_below,
    read_remote_index,
    remote_names,
    write_dataset,
)

pytestmark = pytest.mark.services


def as_list(batch: list) -> list:
    """DataLoader collate function that keeps samples as they are (token arrays differ in length)."""
    return batch


def _epoch(loader: DataLoader) -> collections.Counter:
    """Read one epoch, checking every sample's values; count how often each id was seen."""
    seen: collections.Counter = collections.Counter()
    for batch in loader:
        seen.update(check_sample(sample) for sample in batch)
    return seen


def test_dataloader_epochs_then_served_from_the_cache(remote, tmp_path):
    write_dataset(remote.root)
    dataset = StreamingDataset(
        remote=remote.root, local=str(tmp_path / "cache"), batch_size=BATCH_SIZE, shuffle=True, validate_hash="sha1"
    )
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=2, collate_fn=as_list)
    everything = collections.Counter(range(NUM_SAMPLES))
    assert _epoch(loader) == everything

    delete_remote(remote.root)
    assert remote_names(remote.root) == []
    assert _epoch(loader) == everything, "the second epoch must be served from the local cache"


def test_random_access_downloads_only_that_shard(remote, tmp_path):
    write_dataset(remote.root)
    index = read_remote_index(remote.root, str(tmp_path))
    shard_id = 2
    first = sum(shard["samples"] for shard in index["shards"][:shard_id])
    local = tmp_path / "cache"
    dataset = StreamingDataset(remote=remote.root, local=str(local), batch_size=BATCH_SIZE)
    assert sorted(files_below(str(local))) == ["index.json"]

    sample = dataset[first + 1]
    assert check_sample(sample) == first + 1
    assert check_sample(dataset[first]) == first
    shard = index["shards"][shard_id]
    present = files_below(str(local))
    present.pop("index.json")
    assert present == {shard["raw_data"]["basename"]: shard["raw_data"]["bytes"]}, "only that shard, decompressed"


class DiskWatcher:
    """Samples the total size of the files below a directory on a thread, keeping the largest seen."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.largest = 0
        self.largest_files: dict[str, int] = {}  # the files seen at the peak, for the failure message
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            files = files_below(self.directory)
            if sum(files.values()) > self.largest:
                self.largest, self.largest_files = sum(files.values()), files
            self.samples += 1
            self._stop.wait(0.002)

    def __enter__(self) -> DiskWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


# Room for 4 shards: only the `predownload` window; for 16: each of the 2 workers also prepares 2 shards ahead.
@pytest.mark.parametrize(("shards_held", "count"), [(4, 300), (16, 600)])
def test_eviction_keeps_the_cache_under_its_limit(remote, tmp_path, shards_held, count):
    staging = str(tmp_path / "staging")
    write_dataset((staging, remote.root), count=count, size_limit=1000, keep_local=True)
    sizes = files_below(staging)
    index = read_remote_index(remote.root, str(tmp_path))
    largest = max(shard["raw_data"]["bytes"] + shard["zip_data"]["bytes"] for shard in index["shards"])
    limit = sizes["index.json"] + shards_held * largest
    total = sum(shard["raw_data"]["bytes"] for shard in index["shards"]) + sizes["index.json"]
    assert total > 1.5 * limit, "the dataset must not fit in the cache, or nothing is evicted"

    local = str(tmp_path / "cache")
    # In order (no shuffle) each shard is fetched about once; shuffled, almost every sample would refetch one.
    dataset = StreamingDataset(remote=remote.root, local=local, batch_size=BATCH_SIZE, cache_limit=limit)
    loader = DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=2, collate_fn=as_list)
    with DiskWatcher(local) as disk:
        seen = _epoch(loader)
    assert seen == collections.Counter(range(count))
    assert disk.samples > 10
    assert disk.largest <= limit, f"{disk.largest} bytes on disk, above cache_limit={limit}: {disk.largest_files}"
    assert sum(files_below(local).values()) <= limit


def test_missing_index_names_its_url(remote, tmp_path):
    missing = join_url(remote.root, "no-dataset-here")
    with pytest.raises(FileNotFoundError, match="(?i)not found|no such file") as raised:
        StreamingDataset(remote=missing, local=str(tmp_path / "cache"), batch_size=BATCH_SIZE)
    assert join_url(missing, "index.json") in str(raised.value)


def test_missing_shard_names_its_url(remote, tmp_path):
    write_dataset(remote.root, count=40)
    index = read_remote_index(remote.root, str(tmp_path))
    lost = index["shards"][1]["zip_data"]["basename"]
    storage_for(remote.root).delete(join_url(remote.root, lost))
    dataset = StreamingDataset(
        remote=remote.root, local=str(tmp_path / "cache"), batch_size=BATCH_SIZE, download_retry=3
    )
    assert check_sample(dataset[0]) == 0
    with pytest.raises(FileNotFoundError, match="(?i)not found|no such file") as raised:
        dataset[index["shards"][0]["samples"]]
    assert join_url(remote.root, lost) in str(raised.value)


def test_bad_credentials_say_so_without_the_secret(cloud, break_credentials, tmp_path):
    write_dataset(cloud.root, count=20)
    break_credentials(cloud)
    with pytest.raises(CredentialsError, match=CREDENTIALS_MESSAGE) as raised:
        StreamingDataset(remote=cloud.root, local=str(tmp_path / "cache"), batch_size=BATCH_SIZE)
    assert cloud.root in str(raised.value)
    assert_no_secret(raised.value)
    assert os.listdir(tmp_path / "cache") == [], "a refused download leaves nothing in the cache"
