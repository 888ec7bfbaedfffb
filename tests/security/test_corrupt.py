"""Issue 15, item 10: corrupt input fails with an error naming the file, the sample and the column."""

from __future__ import annotations

import json
import os
import struct

import pytest

from streaming import LocalDataset, MDSWriter, StreamingDataset
from streaming.format.errors import ShardCorruptError


def _write(path: str, columns: dict, samples: list[dict], **kwargs) -> dict:
    with MDSWriter(out=path, columns=columns, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)


def _save(path: str, index: dict) -> None:
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump(index, f)


def _patch(path: str, basename: str, at: int, data: bytes) -> None:
    with open(os.path.join(path, basename), "r+b") as f:
        f.seek(at)
        f.write(data)


@pytest.mark.parametrize("field", ["samples", "bytes"])
def test_huge_counts(tmp_path, field):
    out = str(tmp_path / "ds")
    index = _write(out, {"x": "int"}, [{"x": 1}])
    if field == "samples":
        index["shards"][0]["samples"] = 2**64
    else:
        index["shards"][0]["raw_data"]["bytes"] = 2**64
    _save(out, index)
    for make in (lambda: LocalDataset(out), lambda: StreamingDataset(local=out, batch_size=1)):
        with pytest.raises(ValueError, match=r"index.json.*shards\[0\]"):
            make()


def test_empty_basename(tmp_path):
    out = str(tmp_path / "ds")
    index = _write(out, {"x": "int"}, [{"x": 1}])
    index["shards"][0]["raw_data"]["basename"] = ""
    _save(out, index)
    with pytest.raises(ValueError, match="shard 0, raw_data: shard basename must be a non-empty string"):
        LocalDataset(out)


def _first_sample_start(out: str, basename: str) -> int:
    with open(os.path.join(out, basename), "rb") as f:
        head = f.read(12)
    return struct.unpack_from("<I", head, 4)[0]


def test_offsets_past_the_end(tmp_path):
    out = str(tmp_path / "ds")
    index = _write(out, {"x": "str"}, [{"x": "a"}, {"x": "b"}])
    name = index["shards"][0]["raw_data"]["basename"]
    _patch(out, name, 8, struct.pack("<I", 1 << 30))  # the second sample's start
    with pytest.raises(ShardCorruptError, match=name):
        LocalDataset(out)[1]


def test_invalid_utf8_names_file_sample_and_column(tmp_path):
    out = str(tmp_path / "ds")
    index = _write(out, {"id": "int", "text": "str"}, [{"id": 0, "text": "ok"}, {"id": 1, "text": "éé"}])
    name = index["shards"][0]["raw_data"]["basename"]
    with open(os.path.join(out, name), "rb") as f:
        data = f.read()
    _patch(out, name, data.rindex("éé".encode()), b"\xff")
    dataset = LocalDataset(out)
    with pytest.raises(ShardCorruptError, match=rf"{name}, sample 1, column text: .*UnicodeDecodeError"):
        dataset[1]
    with pytest.raises(ShardCorruptError, match=rf"{name}, sample 1, column text"):
        list(dataset)


def test_deeply_nested_json(tmp_path):
    out = str(tmp_path / "ds")
    index = _write(out, {"obj": "bytes"}, [{"obj": b"[" * 100_000 + b"]" * 100_000}])
    index["shards"][0]["column_encodings"] = ["json"]
    _save(out, index)
    with pytest.raises(ShardCorruptError, match=r"sample 0, column obj"):
        LocalDataset(out)[0]


def test_column_names_shorter_than_encodings(tmp_path):
    out = str(tmp_path / "ds")
    index = _write(out, {"a": "int", "b": "str"}, [{"a": 1, "b": "x"}])
    index["shards"][0]["column_names"] = ["a"]
    _save(out, index)
    with pytest.raises(ShardCorruptError, match="lists 1 column_names, 2 column_encodings"):
        LocalDataset(out)


def test_a_corrupt_length_field_is_caught(tmp_path):
    out = str(tmp_path / "ds")
    index = _write(out, {"a": "str", "b": "str"}, [{"a": "xx", "b": "yy"}, {"a": "zz", "b": "ww"}])
    name = index["shards"][0]["raw_data"]["basename"]
    start = _first_sample_start(out, name)
    _patch(out, name, start, struct.pack("<I", 6))  # column a claims 6 bytes: it would read b's and more
    with pytest.raises(ShardCorruptError, match=rf"{name}, sample 0: its length fields add up to"):
        LocalDataset(out)[0]
    assert LocalDataset(out)[1] == {"a": "zz", "b": "ww"}


def test_size_limit_1_empty_shard_reads_cleanly(tmp_path):
    """Upstream lists an empty first shard here (kept for byte compatibility); every read path handles it."""
    out = str(tmp_path / "ds")
    index = _write(out, {"x": "int"}, [{"x": i} for i in range(3)], size_limit=1)
    assert [shard["samples"] for shard in index["shards"]] == [0, 1, 1, 1]
    dataset = LocalDataset(out)
    assert [sample["x"] for sample in dataset] == [0, 1, 2] == [dataset[i]["x"] for i in range(3)]
    assert list(dataset.shards[0]) == []
    with pytest.raises(IndexError, match="out of range"):
        dataset.shards[0][0]
    assert sorted(StreamingDataset(local=out, batch_size=1)[i]["x"] for i in range(3)) == [0, 1, 2]
