"""The driver's commit protocol on its own: which shards are published and which files are deleted."""

from __future__ import annotations

import json
import os

import pytest

from streaming.convert.attempt import Attempt
from streaming.convert.commit import (
    check_append_columns,
    check_destination,
    committed_shards,
    publish,
)
from streaming.storage.dataset_root import DatasetRoot
from tests.spark.helpers import commit_files, files_under


def shard(name: str, samples: int) -> dict:
    return {
        "column_encodings": ["int64"],
        "column_names": ["id"],
        "column_sizes": [8],
        "compression": None,
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": name, "bytes": 100, "hashes": {}},
        "samples": samples,
        "size_limit": 1024,
        "version": 2,
        "zip_data": None,
    }


def attempt(partition: int, number: int, run: str = "r1", shards: int = 2) -> Attempt:
    folder = f"{run}/part-{partition:05d}-attempt-{number}"
    return Attempt(
        partition, number, folder, [shard(f"shard.{i:05d}.mds", 3) for i in range(shards)], 3 * shards, 100 * shards, 0
    )


def touch(root: str, relative: str) -> None:
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as file:
        file.write("x")


def write_attempt_files(root: str, item: Attempt) -> None:
    for entry in item.shards:
        touch(root, f"{item.directory}/{entry['raw_data']['basename']}")
    touch(root, f"{item.directory}/index.json")


def test_committed_shards_follow_partition_order_with_root_relative_names():
    shards = committed_shards([attempt(2, 9), attempt(0, 4), attempt(1, 5), attempt(0, 7)])
    names = [entry["raw_data"]["basename"] for entry in shards]
    assert names == [
        "r1/part-00000-attempt-4/shard.00000.mds",
        "r1/part-00000-attempt-4/shard.00001.mds",
        "r1/part-00001-attempt-5/shard.00000.mds",
        "r1/part-00001-attempt-5/shard.00001.mds",
        "r1/part-00002-attempt-9/shard.00000.mds",
        "r1/part-00002-attempt-9/shard.00001.mds",
    ]


def test_publish_keeps_only_reported_attempts(tmp_path):
    root = str(tmp_path / "ds")
    winners = [attempt(0, 1), attempt(1, 2)]
    for item in [*winners, attempt(0, 3), attempt(1, 8, shards=1)]:
        write_attempt_files(root, item)
    touch(root, "r1/part-00002-attempt-6/shard.00000.mds")  # a failed attempt without its index
    touch(root, "unrelated/readme.txt")
    destination = DatasetRoot(root)
    publish(destination, "r1", winners, "error", metadata={"run": "r1"})
    index = json.load(open(os.path.join(root, "index.json")))
    assert index["version"] == 2 and len(index["shards"]) == 4
    assert files_under(root) == {
        "index.json",
        "mds_conversion.json",
        "_mds_log/00000000000000000001.json",
        "_mds_log/index.json",
        "unrelated/readme.txt",
        *(
            f"{item.directory}/{name}"
            for item in winners
            for name in ("index.json", "shard.00000.mds", "shard.00001.mds")
        ),
    }
    assert sorted(os.listdir(os.path.join(root, "r1"))) == ["part-00000-attempt-1", "part-00001-attempt-2"]


def test_overwrite_removes_the_old_dataset_after_publishing_and_append_extends_it(tmp_path):
    root = str(tmp_path / "ds")
    destination = DatasetRoot(root)
    old = attempt(0, 1, run="old")
    write_attempt_files(root, old)
    publish(destination, "old", [old], "error", metadata={"run": "old"})
    new = attempt(0, 5, run="new", shards=1)
    write_attempt_files(root, new)
    publish(destination, "new", [new], "append", metadata={"run": "new"})
    index = json.load(open(os.path.join(root, "index.json")))
    assert [e["raw_data"]["basename"].split("/")[0] for e in index["shards"]] == ["old", "old", "new"]
    assert [run["run"] for run in json.load(open(os.path.join(root, "mds_conversion.json")))["runs"]] == ["old", "new"]
    newest = attempt(0, 9, run="newest", shards=1)
    write_attempt_files(root, newest)
    publish(destination, "newest", [newest], "overwrite", metadata={"run": "newest"})
    assert files_under(root) == {
        "index.json",
        "mds_conversion.json",
        *commit_files(root),
        "_mds_log/index.json",
        "newest/part-00000-attempt-9/index.json",
        "newest/part-00000-attempt-9/shard.00000.mds",
    }
    assert len(commit_files(root)) == 3
    assert sorted(os.listdir(root)) == ["_mds_log", "index.json", "mds_conversion.json", "newest"]


def test_check_destination_and_append_columns(tmp_path):
    root = str(tmp_path / "ds")
    assert check_destination(DatasetRoot(root), "error").shards == []
    touch(root, "something")
    with pytest.raises(FileExistsError, match="not empty"):
        check_destination(DatasetRoot(root), "error")
    assert check_destination(DatasetRoot(root), "append").shards == []
    with pytest.raises(ValueError, match="mode must be one of"):
        check_destination(DatasetRoot(root), "merge")
    check_append_columns([shard("a", 1)], {"id": "int64"}, root)
    with pytest.raises(ValueError, match=r"Cannot append .* \{'id': 'int64'\} .* \{'id': 'str'\}"):
        check_append_columns([shard("a", 1)], {"id": "str"}, root)
