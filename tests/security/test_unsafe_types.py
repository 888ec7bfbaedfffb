"""Issue 15, item 1: no code runs on read unless ``allow_unsafe_types=True``, whatever the read path."""

from __future__ import annotations

import os
import pickle

import pytest

from streaming import LocalDataset, MDSWriter, StreamingDataset
from streaming.format.mds.reader import MDSReader
from streaming.format.table import ShardTable


class _CreatesFile:
    """A value whose unpickling creates a file (what a hostile ``pkl`` column does)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def hostile(tmp_path):
    out, marker = str(tmp_path / "ds"), str(tmp_path / "pwned")
    with MDSWriter(out=out, columns={"id": "int", "obj": "bytes"}) as writer:
        writer.write({"id": 0, "obj": pickle.dumps(_CreatesFile(marker))})
    # Declare the column as pkl, as a crafted dataset would (the bytes are a real pickle).
    index_path = os.path.join(out, "index.json")
    with open(index_path) as f:
        text = f.read().replace('["int", "bytes"]', '["int", "pkl"]')
    with open(index_path, "w") as f:
        f.write(text)
    return out, marker


def test_local_dataset_refuses_pkl_before_reading(hostile):
    out, marker = hostile
    with pytest.raises(ValueError, match="^Column obj contains an unsafe type: pkl"):
        LocalDataset(out)
    assert not os.path.exists(marker)


def test_a_reader_decodes_nothing_unsafe_until_allowed(hostile):
    out, marker = hostile
    reader = LocalDataset(out, allow_unsafe_types=True).shards[0]
    with pytest.raises(ValueError, match="unsafe type: pkl"):
        reader.validate(False)  # the owner withdraws the permission: the reader remembers
    for read in (lambda: reader[0], lambda: next(iter(reader)), lambda: reader.get_item(0)):
        with pytest.raises(ValueError, match="unsafe type: pkl"):
            read()
    fresh = MDSReader.from_json(out, None, ShardTable.from_file(os.path.join(out, "index.json")).entry(0))
    with pytest.raises(ValueError, match="unsafe type: pkl"):
        fresh.get_item(0)
    assert not os.path.exists(marker)


def test_streaming_dataset_refuses_pkl(hostile):
    out, marker = hostile
    with pytest.raises(ValueError, match="unsafe type: pkl"):
        StreamingDataset(local=out, batch_size=1)
    assert not os.path.exists(marker)


def test_opting_in_decodes(hostile):
    out, marker = hostile
    dataset = LocalDataset(out, allow_unsafe_types=True)
    dataset[0]
    assert os.path.exists(marker)
