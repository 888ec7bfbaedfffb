"""Shards written by MosaicML Streaming read to exactly what it decoded, and writing the same inputs gives
byte-identical files (except where a codec embeds its own bytes: gzip's mtime, JPEG/PNG encoders)."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from streaming import CSVWriter, JSONWriter, LocalDataset, MDSWriter, TSVWriter, XSVWriter
from tests.helpers import FIXTURES, assert_same_value, copy_fixture, load_fixture_pickle

DATASETS = sorted(os.listdir(os.path.join(FIXTURES, "formats")))


def _load(name: str, what: str):
    return load_fixture_pickle(os.path.join(FIXTURES, "formats", name, what))


@pytest.mark.parametrize("name", DATASETS)
def test_reads_reference_dataset(name, tmp_path):
    local = copy_fixture(f"formats/{name}", str(tmp_path / name))
    expected = _load(name, "decoded.pkl")
    dataset = LocalDataset(local, allow_unsafe_types=True)  # a trusted fixture with a pkl column
    assert len(dataset) == len(expected)
    for i, sample in enumerate(dataset):
        assert_same_value(sample, expected[i], f"{name}[{i}] (iteration)")
    for i in (0, len(expected) // 2, len(expected) - 1, -1):
        assert_same_value(dataset[i], expected[i], f"{name}[{i}] (random access)")


def _writer_for(shard: dict, out: str):
    common = {
        "out": out,
        "compression": shard["compression"],
        "hashes": shard["hashes"],
        "size_limit": shard["size_limit"],
    }
    fmt = shard["format"]
    if fmt == "mds":
        columns = dict(zip(shard["column_names"], shard["column_encodings"]))
        return MDSWriter(columns=columns, **common)
    if fmt == "json":
        return JSONWriter(columns=shard["columns"], newline=shard["newline"], **common)
    columns = dict(zip(shard["column_names"], shard["column_encodings"]))
    if fmt == "xsv":
        return XSVWriter(columns=columns, separator=shard["separator"], newline=shard["newline"], **common)
    return {"csv": CSVWriter, "tsv": TSVWriter}[fmt](columns=columns, newline=shard["newline"], **common)


def _content(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if path.endswith(".gz") else data


@pytest.mark.parametrize("name", [n for n in DATASETS if n != "mds_all_encodings"])
def test_writes_identical_bytes(name, tmp_path):
    reference = os.path.join(FIXTURES, "formats", name)
    with open(os.path.join(reference, "index.json")) as f:
        index_text = f.read()
    shards = json.loads(index_text)["shards"]
    out = str(tmp_path / "out")
    with _writer_for(shards[0], out) as writer:
        for sample in _load(name, "inputs.pkl"):
            writer.write(sample)
    expected_files = sorted(f for f in os.listdir(reference) if f.startswith("shard."))
    assert sorted(os.listdir(out)) == sorted(expected_files + ["index.json"])
    for basename in expected_files:
        assert _content(os.path.join(out, basename)) == _content(os.path.join(reference, basename)), basename
    with open(os.path.join(out, "index.json")) as f:
        written = f.read()
    if shards[0]["compression"] and shards[0]["compression"].startswith("gz"):
        ours, theirs = json.loads(written), json.loads(index_text)
        for a, b in zip(ours["shards"], theirs["shards"]):
            for key in ("zip_data", "zip_meta"):
                if b.get(key):
                    assert a[key]["basename"] == b[key]["basename"]
                    a[key] = b[key]
        written = json.dumps(ours, sort_keys=True)
    assert written == index_text
