"""Readers and LocalDataset: indexing, decompression on first use, and clear errors for damaged datasets."""

from __future__ import annotations

import json
import multiprocessing
import os

import numpy as np
import pytest

from streaming import LocalDataset, MDSWriter
from streaming.format.errors import ShardCorruptError


@pytest.fixture
def dataset_dir(tmp_path):
    out = str(tmp_path / "ds")
    with MDSWriter(out=out, columns={"id": "int", "tokens": "ndarray:int16"}, size_limit=600) as w:
        for i in range(100):
            w.write({"id": i, "tokens": np.arange(i % 5 + 1, dtype=np.int16)})
    return out


def _rewrite_index(path, change):
    index_path = os.path.join(path, "index.json")
    with open(index_path) as f:
        index = json.load(f)
    change(index)
    with open(index_path, "w") as f:
        json.dump(index, f)


def test_indexing_forms(dataset_dir):
    ds = LocalDataset(dataset_dir)
    assert len(ds) == ds.size == 100 and len(ds.shards) > 3
    assert ds[0]["id"] == 0 and ds[-1]["id"] == 99 and ds[np.int64(7)]["id"] == 7
    assert [s["id"] for s in ds[10:15]] == list(range(10, 15))
    assert [s["id"] for s in ds[:]] == list(range(100))
    assert [s["id"] for s in ds[::-30]] == [99, 69, 39, 9]
    assert [s["id"] for s in ds[[3, 1, 2]]] == [3, 1, 2]
    assert [[s["id"] for s in row] for row in ds[np.array([[1, 2], [3, 4]])]] == [[1, 2], [3, 4]]
    assert [s["id"] for s in ds] == list(range(100))
    with pytest.raises(IndexError, match="out of range"):
        ds[100]
    with pytest.raises(ValueError, match="^Unsupported argument type passed to __getitem__"):
        ds["a"]
    tokens = ds[12]["tokens"]
    assert tokens.dtype == np.int16 and list(tokens) == [0, 1, 2] and not tokens.flags.writeable


def test_split_subdirectory(tmp_path):
    with MDSWriter(out=str(tmp_path / "root" / "train"), columns={"x": "str"}) as w:
        w.write({"x": "a"})
    assert LocalDataset(str(tmp_path / "root"), split="train")[0] == {"x": "a"}


def test_truncated_shard_names_the_file(dataset_dir):
    path = os.path.join(dataset_dir, "shard.00001.mds")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    ds = LocalDataset(dataset_dir)
    assert ds[0]["id"] == 0
    with pytest.raises(ShardCorruptError, match="shard.00001.mds.*truncated"):
        list(ds)


def test_corrupt_shard_header_names_the_file(dataset_dir):
    path = os.path.join(dataset_dir, "shard.00000.mds")
    with open(path, "r+b") as f:
        f.write(b"\xff\xff\x00\x00")
    with pytest.raises(ShardCorruptError, match="shard.00000.mds"):
        LocalDataset(dataset_dir)[0]


def test_unsupported_index_version(dataset_dir):
    _rewrite_index(dataset_dir, lambda index: index.update(version=3))
    with pytest.raises(ValueError, match="^Unsupported streaming data version: 3"):
        LocalDataset(dataset_dir)


def test_corrupt_index_names_the_file(dataset_dir):
    with open(os.path.join(dataset_dir, "index.json"), "w") as f:
        f.write('{"shards": [')
    with pytest.raises(ValueError, match="index.json is empty or corrupted"):
        LocalDataset(dataset_dir)


@pytest.mark.parametrize("basename", ["../outside.mds", "/etc/passwd", "a/../../b.mds", "C:evil.mds"])
def test_basename_escaping_the_dataset_is_rejected(dataset_dir, basename):
    _rewrite_index(dataset_dir, lambda index: index["shards"][0]["raw_data"].update(basename=basename))
    with pytest.raises(ValueError, match="not a plain relative path"):
        LocalDataset(dataset_dir)


def test_nested_basename_is_allowed(tmp_path):
    with MDSWriter(out=str(tmp_path / "root" / "part-1"), columns={"x": "int"}) as w:
        w.write({"x": 5})
    entry = json.load(open(tmp_path / "root" / "part-1" / "index.json"))["shards"][0]
    entry["raw_data"]["basename"] = "part-1/" + entry["raw_data"]["basename"]
    with open(tmp_path / "root" / "index.json", "w") as f:
        json.dump({"shards": [entry], "version": 2}, f)
    assert LocalDataset(str(tmp_path / "root"))[0] == {"x": 5}


def _read_all(path):
    return [s["id"] for s in LocalDataset(path)]


def test_concurrent_first_use_decompression(tmp_path):
    out = str(tmp_path / "z")
    with MDSWriter(out=out, columns={"id": "int"}, compression="zstd", size_limit=400) as w:
        for i in range(500):
            w.write({"id": i})
    assert not [f for f in os.listdir(out) if f.endswith(".mds")]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_read_all, [out] * 4)
    assert all(result == list(range(500)) for result in results)
    names = os.listdir(out)
    assert not [f for f in names if ".tmp" in f]
    assert len([f for f in names if f.endswith(".mds")]) == len([f for f in names if f.endswith(".zstd")])


def test_decompressed_size_mismatch_is_reported(tmp_path):
    out = str(tmp_path / "z")
    with MDSWriter(out=out, columns={"id": "int"}, compression="zstd") as w:
        w.write({"id": 1})
    with open(os.path.join(out, "shard.00000.mds.zstd"), "r+b") as f:
        data = bytearray(f.read())
        data[-1] ^= 0xFF
        f.seek(0)
        f.write(data)
    with pytest.raises(ShardCorruptError, match="shard.00000.mds.zstd"):
        LocalDataset(out)[0]
