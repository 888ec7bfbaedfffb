"""`streaming.format.index`, the owner of the index schema: names, entry helpers, one validator, one publish."""

from __future__ import annotations

import inspect
import json
import os

import pytest

from streaming.format import CSVReader, JSONReader, MDSReader, TSVReader, XSVReader
from streaming.format.index import (
    FILE_KEYS,
    INDEX_BASENAME,
    dumps_index,
    get_index_basename,
    parse_index,
    publish_index,
    rebase,
    shard_files,
    stored_file,
)
from streaming.format.reader_registry import READERS, reader_from_json
from streaming.format.table import ShardTable


def _entry(compressed: bool) -> dict:
    return {
        "format": "json",
        "version": 2,
        "samples": 3,
        "raw_data": {"basename": "shard.00000.json", "bytes": 30, "hashes": {}},
        "zip_data": {"basename": "shard.00000.json.zstd", "bytes": 12, "hashes": {}} if compressed else None,
        "raw_meta": {"basename": "shard.00000.json.meta", "bytes": 20, "hashes": {}},
        "zip_meta": None,
    }


def test_the_names_of_the_schema():
    assert FILE_KEYS == ("raw_data", "zip_data", "raw_meta", "zip_meta")
    assert get_index_basename() == INDEX_BASENAME == "index.json"


def test_shard_files_stored_file_and_rebase():
    entry = _entry(compressed=True)
    assert [key for key, _ in shard_files(entry)] == ["raw_data", "zip_data", "raw_meta"]
    assert stored_file(entry)["basename"] == "shard.00000.json.zstd"
    assert stored_file(_entry(compressed=False))["basename"] == "shard.00000.json"
    moved = rebase(entry, "run/part-00001")
    assert [info["basename"] for _, info in shard_files(moved)] == [
        "run/part-00001/shard.00000.json",
        "run/part-00001/shard.00000.json.zstd",
        "run/part-00001/shard.00000.json.meta",
    ]
    assert moved["zip_meta"] is None and moved["samples"] == 3
    assert entry["raw_data"]["basename"] == "shard.00000.json", "rebase leaves its input alone"
    assert rebase(entry, "") == entry


def test_publish_index_replaces_the_index_atomically(tmp_path):
    folder = str(tmp_path / "dataset")
    path = publish_index(folder, [_entry(compressed=False)])
    assert path == os.path.join(folder, INDEX_BASENAME)
    publish_index(folder, [_entry(compressed=True)])
    with open(path) as index:
        assert index.read() == dumps_index([_entry(compressed=True)])
    assert os.listdir(folder) == [INDEX_BASENAME], "no temporary file is left behind"


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda index: index.update(version=3),
            r"^Unsupported streaming data version: 3\. Expected version 2\. \(index file at ",
        ),
        (
            lambda index: index["shards"][0].update(version=1),
            r"^Unsupported streaming data version: 1\. Expected version 2\. \(shard 0 in ",
        ),
        (
            lambda index: index["shards"][0]["raw_meta"].update(basename="../x"),
            "shard 0, raw_meta: shard basename '../x' is not a plain relative path",
        ),
    ],
)
def test_both_index_parsers_apply_the_same_checks(change, message):
    index = {"shards": [_entry(compressed=False)], "version": 2}
    change(index)
    text = json.dumps(index)
    with pytest.raises(ValueError, match=message):
        parse_index(text, "somewhere")
    with pytest.raises(ValueError, match=message):
        ShardTable.from_bytes(text.encode(), "somewhere")


@pytest.mark.parametrize("reader", [MDSReader, JSONReader, XSVReader, CSVReader, TSVReader])
def test_each_reader_names_the_index_fields_its_constructor_takes(reader):
    parameters = list(inspect.signature(reader.__init__).parameters)[3:]  # after self, dirname, split
    assert sorted(reader.index_fields) == sorted(parameters)
    assert READERS[reader.__name__.removesuffix("Reader").lower()] is reader


def test_reader_from_json_ignores_unknown_keys_and_names_missing_ones(tmp_path):
    entry = {**_entry(compressed=False), "columns": {"a": "str"}, "newline": "\n", "compression": None}
    entry.update(hashes=[], size_limit=None, added_by_a_newer_writer=True)
    reader = reader_from_json(str(tmp_path), None, entry)
    assert isinstance(reader, JSONReader) and reader.columns == {"a": "str"} and len(reader) == 3
    del entry["newline"], entry["raw_meta"]
    with pytest.raises(ValueError, match="json shard is missing fields: newline, raw_meta"):
        reader_from_json(str(tmp_path), None, entry)
