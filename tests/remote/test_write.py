"""MDSWriter over every scheme: shards and index land on the remote, the index last; exist_ok; failed uploads."""

from __future__ import annotations

import os
import threading

import pytest

from streaming import MDSWriter, StreamingDataset
from streaming.storage import CredentialsError, Storage, storage_for
from streaming.storage.url import join_url, relative_to, split_url
from tests.remote.data import (
    BATCH_SIZE,
    COLUMNS,
    CREDENTIALS_MESSAGE,
    NUM_SAMPLES,
    assert_no_secret,
    check_sample,
    files_below,
    make_sample,
    read_remote_index,
    remote_names,
    shard_files,
    write_dataset,
)

pytestmark = pytest.mark.services


def _record_puts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Record ("start"|"end", url) around every upload, in the order they happen (any thread)."""
    events: list[tuple[str, str]] = []
    lock = threading.Lock()
    original = Storage.put

    def recording_put(self: Storage, local_path: str, url: str) -> None:
        with lock:
            events.append(("start", url))
        original(self, local_path, url)
        with lock:
            events.append(("end", url))

    monkeypatch.setattr(Storage, "put", recording_put)
    return events


def test_write_to_url_publishes_the_index_last(remote, monkeypatch, tmp_path, private_tempdir):
    events = _record_puts(monkeypatch)
    writer = MDSWriter(
        out=remote.root, columns=COLUMNS, compression="zstd", hashes=["sha1"], size_limit=2000, max_workers=3
    )
    for sample_id in range(NUM_SAMPLES):
        writer.write(make_sample(sample_id))
    assert not storage_for(remote.root).exists(join_url(remote.root, "index.json")), (
        "no index may be readable before finish()"
    )
    writer.finish()

    index = read_remote_index(remote.root, str(tmp_path))
    assert sum(shard["samples"] for shard in index["shards"]) == NUM_SAMPLES
    assert len(index["shards"]) >= 4
    assert remote_names(remote.root) == sorted([*shard_files(index), "index.json"])
    if remote.scheme != "file":  # a file:// output is written in place, without uploads
        uploaded = [relative_to(url, remote.root) for kind, url in events if kind == "end"]
        assert sorted(uploaded) == remote_names(remote.root)
        index_start = events.index(("start", join_url(remote.root, "index.json")))
        shards_done = [i for i, (kind, url) in enumerate(events) if kind == "end" and not url.endswith("index.json")]
        assert max(shards_done) < index_start, f"index.json upload started before every shard was uploaded: {events}"
        assert os.listdir(private_tempdir) == [], "the staging copy (and its owner file) is removed without keep_local"


def test_write_to_local_and_remote_pair_keeps_local(remote, tmp_path):
    local = str(tmp_path / "local")
    write_dataset((local, remote.root), keep_local=True)
    index = read_remote_index(remote.root, str(tmp_path))
    expected = sorted([*shard_files(index), "index.json"])
    assert remote_names(remote.root) == expected
    assert sorted(files_below(local)) == expected
    storage = storage_for(remote.root)
    for name, size in files_below(local).items():
        assert storage.size(join_url(remote.root, name)) == size, name


def test_exist_ok_against_a_non_empty_remote(remote, tmp_path):
    write_dataset(remote.root, count=60)
    with pytest.raises(FileExistsError) as raised:
        write_dataset(remote.root, count=10)
    named = split_url(remote.root).key if remote.scheme == "file" else remote.root
    assert named in str(raised.value) and "exist_ok" in str(raised.value)

    write_dataset(remote.root, first=1000, count=30, exist_ok=True)
    index = read_remote_index(remote.root, str(tmp_path))
    assert sum(shard["samples"] for shard in index["shards"]) == 30
    assert set(shard_files(index)) <= set(remote_names(remote.root))
    dataset = StreamingDataset(remote=remote.root, local=str(tmp_path / "cache"), batch_size=BATCH_SIZE)
    assert [check_sample(dataset[i]) for i in range(dataset.num_samples)] == list(range(1000, 1030))


def test_failed_upload_raises_from_finish_without_an_index(cloud, break_credentials, tmp_path):
    writer = MDSWriter(out=cloud.root, columns=COLUMNS, compression="zstd", size_limit=None)
    restore = break_credentials(cloud)
    for sample_id in range(20):
        writer.write(make_sample(sample_id))  # one shard, uploaded only when finish() closes it
    with pytest.raises(CredentialsError, match=CREDENTIALS_MESSAGE) as raised:
        writer.finish()
    assert_no_secret(raised.value)
    restore()
    assert "index.json" not in remote_names(cloud.root)
