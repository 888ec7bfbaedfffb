"""ShardUploader on every scheme: background uploads, index last, keep_local, exist_ok, failures."""

from __future__ import annotations

import json
import os

import pytest

from streaming.format.index import INDEX_BASENAME
from streaming.storage import ShardUploader, storage_for
from streaming.storage.url import join_url

pytestmark = pytest.mark.services

FILES = {"shard.00000.mds": b"a" * 5000, "shard.00001.mds.zstd": b"b" * 300, "part/shard.00002.json.meta": b"c"}


def _write_dataset(uploader: ShardUploader) -> None:
    for name, data in FILES.items():
        path = os.path.join(uploader.local, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as sink:
            sink.write(data)
        uploader.upload(name)
    with open(os.path.join(uploader.local, "index.json"), "w") as sink:
        json.dump({"version": 2, "shards": []}, sink)


def test_writes_dataset_to_remote(remote, tmp_path):
    out = (str(tmp_path / "staging"), remote.root) if remote.scheme == "local" else remote.root
    uploader = ShardUploader(out, max_workers=3, index_basename=INDEX_BASENAME)
    assert uploader.remote == remote.root
    local = uploader.local
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    storage = storage_for(remote.root)
    assert storage.list(remote.root) == sorted(join_url(remote.root, name) for name in [*FILES, "index.json"])
    for name, data in FILES.items():
        storage.get(join_url(remote.root, name), str(tmp_path / "check" / name))
        assert (tmp_path / "check" / name).read_bytes() == data
    assert not os.path.exists(local), "the temporary local copy is removed when keep_local=False"


def test_keep_local_with_local_remote_pair(cloud, tmp_path):
    local = str(tmp_path / "local")
    uploader = ShardUploader((local, cloud.root), keep_local=True, max_workers=2, index_basename=INDEX_BASENAME)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    assert sorted(os.path.relpath(os.path.join(d, f), local) for d, _, fs in os.walk(local) for f in fs) == sorted(
        [*FILES, "index.json"]
    )
    assert storage_for(cloud.root).exists(join_url(cloud.root, "index.json"))


def test_uploaded_files_leave_local_dir_without_keep_local(remote_factory, tmp_path):
    s3 = remote_factory("s3")
    local = str(tmp_path / "local")
    uploader = ShardUploader((local, s3.root), index_basename=INDEX_BASENAME)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    assert not os.path.exists(local)
    assert len(storage_for(s3.root).list(s3.root)) == len(FILES) + 1


def test_exist_ok_is_checked_against_the_remote(remote_factory):
    s3 = remote_factory("s3")
    first = ShardUploader(s3.root, index_basename=INDEX_BASENAME)
    _write_dataset(first)
    first.finish(INDEX_BASENAME)
    with pytest.raises(FileExistsError, match="already holds") as raised:
        ShardUploader(s3.root, index_basename=INDEX_BASENAME)
    assert s3.root in str(raised.value)
    again = ShardUploader(s3.root, exist_ok=True, index_basename=INDEX_BASENAME)
    storage = storage_for(s3.root)
    assert not storage.exists(join_url(s3.root, "index.json")), "a stale index is removed before new shards land"
    _write_dataset(again)
    again.finish(INDEX_BASENAME)
    assert storage.exists(join_url(s3.root, "index.json"))


def test_failed_shard_blocks_the_index(remote_factory):
    s3 = remote_factory("s3")
    uploader = ShardUploader(s3.root, retry=1, index_basename=INDEX_BASENAME)
    _write_dataset(uploader)
    uploader.upload("never-written.mds")
    with pytest.raises(FileNotFoundError, match="never-written.mds"):
        uploader.finish(INDEX_BASENAME)
    with pytest.raises(FileNotFoundError):
        uploader.check()
    storage = storage_for(s3.root)
    assert not storage.exists(join_url(s3.root, "index.json"))
    assert storage.exists(join_url(s3.root, "shard.00000.mds"))


def test_abort_publishes_no_index_and_keeps_the_local_copy(remote_factory):
    s3 = remote_factory("s3")
    uploader = ShardUploader(s3.root, index_basename=INDEX_BASENAME)
    local = uploader.local
    _write_dataset(uploader)
    error = OSError("disk full")
    uploader.abort(error)
    assert not storage_for(s3.root).exists(join_url(s3.root, "index.json"))
    assert sorted(os.listdir(local)) and local in error.__notes__[0]


def test_local_only_output(tmp_path):
    out = str(tmp_path / "out")
    uploader = ShardUploader(out, index_basename=INDEX_BASENAME)
    assert (uploader.local, uploader.remote) == (out, None)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    assert os.path.isfile(os.path.join(out, "index.json"))
    with pytest.raises(FileExistsError, match="not empty"):
        ShardUploader(out, index_basename=INDEX_BASENAME)
    ShardUploader(out, exist_ok=True, index_basename=INDEX_BASENAME)
    assert os.listdir(out) == []


def test_bad_out_is_rejected():
    with pytest.raises(ValueError, match="pair"):
        ShardUploader(("a", "b", "c"), index_basename=INDEX_BASENAME)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry"):
        ShardUploader("/tmp/x-never-created", retry=0, index_basename=INDEX_BASENAME)
