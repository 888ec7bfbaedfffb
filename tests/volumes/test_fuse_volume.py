"""The FUSE-mounted `/Volumes/...` (tests/volume_fuse.py): it refuses what a cluster's volume mount refuses, and
the writers, `merge_index` and the datasets work on it through plain `/Volumes/...` paths."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os

import numpy as np
import pytest

from streaming import CSVWriter, JSONWriter, LocalDataset, MDSWriter, StreamingDataset
from streaming.format.merge import merge_index
from streaming.storage.local import LocalStorage
from streaming.storage.registry import storage_for, volume_mount

AT_FDCWD = -100
RENAME_NOREPLACE = 1
COLUMNS = {"id": "int", "text": "str", "vector": "ndarray:float32:4"}


@pytest.fixture
def folder(fuse_volume_mount):
    """A fresh folder on the mount: its `/Volumes/...` path and where its files land."""
    return fuse_volume_mount.folder()


def _samples(count: int) -> list[dict]:
    return [
        {"id": i, "text": f"sample {i} " + "x" * (i % 50), "vector": np.full(4, i / 3, np.float32)}
        for i in range(count)
    ]


def test_the_mount_refuses_appends_random_writes_links_and_no_replace_renames(folder):
    root, backing = folder
    path = f"{root}/file.bin"
    with open(path, "wb") as file:  # sequential writes, as many as needed
        file.write(b"a" * 200_000)
        file.write(b"b" * 10)
    assert (backing / "file.bin").stat().st_size == 200_010

    with pytest.raises(OSError, match="Illegal seek") as append:
        open(path, "ab")
    assert append.value.errno == errno.ESPIPE
    with open(path, "r+b", buffering=0) as file, pytest.raises(OSError) as random_write:
        file.seek(5)
        file.write(b"c")
    assert random_write.value.errno == errno.EOPNOTSUPP
    with pytest.raises(OSError) as truncate:
        os.truncate(path, 7)
    assert truncate.value.errno == errno.EOPNOTSUPP
    with pytest.raises(OSError) as link:
        os.link(path, f"{root}/linked.bin")
    # The filesystem answers ENOSYS; kernels since 6.x report it to link() as EPERM, older ones as ENOSYS.
    assert link.value.errno in (errno.ENOSYS, errno.EPERM)
    with pytest.raises(OSError) as symlink:
        os.symlink(path, f"{root}/symlink.bin")
    assert symlink.value.errno == errno.ENOSYS

    libc = ctypes.CDLL(None, use_errno=True)
    outcome = libc.renameat2(AT_FDCWD, path.encode(), AT_FDCWD, f"{root}/moved.bin".encode(), RENAME_NOREPLACE)
    # ENOSYS from the filesystem, which the kernel reports as EINVAL once it knows rename flags are unsupported.
    assert outcome == -1 and ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL)
    assert sorted(os.listdir(root)) == ["file.bin"]
    assert (backing / "file.bin").read_bytes()[:1] == b"a", "no refused call may change the file"


def test_the_mount_allows_replacing_renames_local_locks_and_mapped_reads(folder):
    root, backing = folder
    for name, content in (("a", b"first"), ("b", b"second")):
        with open(f"{root}/{name}", "wb") as file:
            file.write(content)
    os.replace(f"{root}/a", f"{root}/b")
    assert sorted(os.listdir(backing)) == ["b"] and (backing / "b").read_bytes() == b"first"
    with open(f"{root}/b", "rb") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(file.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        import mmap

        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            assert mapped[:] == b"first"
    with open(f"{root}/b", "wb") as file:  # rewriting a file from the start truncates it first: allowed
        file.write(b"third")
    assert (backing / "b").read_bytes() == b"third"


def test_a_fuse_volume_path_is_a_mounted_volume(folder):
    root, _ = folder
    assert volume_mount(root) == root and volume_mount(f"dbfs:{root}") == root
    assert isinstance(storage_for(f"{root}/x"), LocalStorage)


@pytest.mark.parametrize(
    ("writer", "kwargs"),
    [
        (MDSWriter, {"compression": "zstd", "hashes": ["sha1", "xxh64"]}),
        (MDSWriter, {}),
        (JSONWriter, {"compression": "br"}),
        (CSVWriter, {}),
    ],
)
def test_writers_then_datasets_on_the_volume(folder, tmp_path, writer, kwargs):
    root, backing = folder
    columns = COLUMNS if writer is MDSWriter else {"id": "int", "text": "str"}
    samples = [{name: sample[name] for name in columns} for sample in _samples(300)]
    with writer(out=root, columns=columns, size_limit=4096, **kwargs) as out:
        for sample in samples:
            out.write(sample)
    index = json.loads((backing / "index.json").read_text())
    assert len(index["shards"]) > 2
    for shard in index["shards"]:
        stored = shard["zip_data"] or shard["raw_data"]
        assert (backing / stored["basename"]).stat().st_size == stored["bytes"]

    streamed = StreamingDataset(remote=root, local=str(tmp_path / "cache"), shuffle=False, batch_size=10)
    assert [int(sample["id"]) for sample in streamed] == list(range(300))
    if not kwargs:  # uncompressed shards are read straight off the volume, mapped
        direct = LocalDataset(root)
        assert direct[299]["text"] == samples[299]["text"]


def test_datasets_cache_on_the_volume_and_merge_index_writes_there(fuse_volume_mount, tmp_path):
    (part_a, _), (part_b, _), (cache, cache_backing) = (fuse_volume_mount.folder() for _ in range(3))
    samples = _samples(120)
    for part, chunk in ((part_a, samples[:60]), (part_b, samples[60:])):
        with MDSWriter(out=part, columns=COLUMNS, size_limit=2048, compression="zstd") as out:
            for sample in chunk:
                out.write(sample)
    parent = os.path.dirname(part_a)
    merge_index([f"{part_a}/index.json", f"{part_b}/index.json"], parent)
    merged = json.loads(open(f"{parent}/index.json").read())
    assert sum(shard["samples"] for shard in merged["shards"]) == 120

    dataset = StreamingDataset(remote=part_b, local=cache, shuffle=False, batch_size=6)
    assert [int(sample["id"]) for sample in dataset] == list(range(60, 120))
    assert any(name.endswith(".mds") for name in os.listdir(cache_backing)), "the cache holds decompressed shards"
    assert not [name for name in os.listdir(cache_backing) if name.endswith(".part")]
