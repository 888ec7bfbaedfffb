"""The mapped shard table file: what is written is mapped back equal, and a file it did not write is refused."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from streaming import MDSWriter
from streaming.format.index import FILE_KEYS
from streaming.format.mapped_table import TableFileError, map_table, write_table
from streaming.format.table import ShardTable


def _table(tmp_path, compression: str | None) -> ShardTable:
    out = tmp_path / f"ds-{compression}"
    columns = {"text": "str", "n": "int64"}
    with MDSWriter(out=str(out), columns=columns, size_limit=1 << 10, compression=compression, hashes=["xxh64"]) as w:
        for number in range(300):
            w.write({"text": f"row {number} " * (number % 7), "n": number})
    return ShardTable.from_file(str(out / "index.json"))


def _written(tmp_path, table: ShardTable) -> str:
    path = str(tmp_path / "table.bin")
    with open(path, "wb") as sink:
        write_table(table, sink)
    return path


def _mapped(path: str) -> ShardTable:
    fd = os.open(path, os.O_RDONLY)
    try:
        return map_table(fd, path)
    finally:
        os.close(fd)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_table_is_mapped_back_equal_entry_by_entry(tmp_path, compression):
    table = _table(tmp_path, compression)
    assert len(table) > 10
    mapped = _mapped(_written(tmp_path, table))
    assert len(mapped) == len(table)
    assert [mapped.entry(i) for i in range(len(table))] == [table.entry(i) for i in range(len(table))]
    assert np.array_equal(mapped.samples, table.samples) and mapped.samples.dtype == np.int64
    assert [kind for kind in FILE_KEYS if mapped.files[kind]] == [kind for kind in FILE_KEYS if table.files[kind]]
    # Views of the mapping, never writable: no process can change what the others read.
    assert not mapped.samples.flags.writeable


def test_an_empty_table_round_trips(tmp_path):
    table = ShardTable.from_bytes(b'{"version": 2, "shards": []}', "empty")
    assert len(_mapped(_written(tmp_path, table))) == 0


def _aligned(offset: int) -> int:
    return -(-offset // 64) * 64


def _header(path: str) -> tuple[dict, bytes]:
    """The header of a table file and its arrays' bytes (from the aligned start the offsets count from)."""
    data = open(path, "rb").read()
    length = struct.unpack_from("<Q", data, 16)[0]
    return json.loads(data[24 : 24 + length]), data[_aligned(24 + length) :]


def _rewrite(path: str, header: dict, arrays: bytes) -> None:
    encoded = json.dumps(header).encode()
    prefix = b"MDSTABLE" + struct.pack("<IIQ", 2, 0, len(encoded)) + encoded
    with open(path, "wb") as sink:
        sink.write(prefix + b"\0" * (_aligned(len(prefix)) - len(prefix)) + arrays)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda h: h["arrays"][0].__setitem__(1, "|O"), "never writes"),  # an object array: never unpickled
        (lambda h: h["arrays"][0].__setitem__(1, "<i2"), "never writes"),  # samples narrower than int64
        (lambda h: h["arrays"][0].__setitem__(2, 1 << 40), "cut short"),  # past the file's end
        (lambda h: h["arrays"][0].__setitem__(3, 5), "never writes"),  # a length other than the shard count
        (lambda h: h["arrays"].pop(), "invalid header"),  # an array missing
        (lambda h: h["arrays"].append(["extra.names", "<U3", 0, h["count"]]), "never writes"),
        (lambda h: h["configs"].clear(), "does not hold"),  # shards referring to settings not in the file
        (lambda h: h.__setitem__("index", "another"), "another index"),  # the table of another index
    ],
)
def test_a_file_this_module_did_not_write_is_refused(tmp_path, damage, message):
    path = _written(tmp_path, _table(tmp_path, None))
    header, arrays = _header(path)
    _rewrite(path, header, arrays)
    assert len(_mapped(path)) == header["count"]  # rewritten as is, the file maps
    damage(header)
    _rewrite(path, header, arrays)
    with pytest.raises(TableFileError, match=message):
        _mapped(path)


def test_a_truncated_or_foreign_file_is_refused(tmp_path):
    path = _written(tmp_path, _table(tmp_path, None))
    data = open(path, "rb").read()
    with open(path, "wb") as sink:
        sink.write(data[: len(data) // 2])
    with pytest.raises(TableFileError, match="cut short"):
        _mapped(path)
    with open(path, "wb") as sink:
        sink.write(b"PK\x03\x04" + data[4:])
    with pytest.raises(TableFileError, match="not a version-2 table file"):
        _mapped(path)
    with open(path, "wb") as sink:
        sink.write(data[:10])
    with pytest.raises(TableFileError, match="too short"):
        _mapped(path)


def test_a_file_longer_than_its_arrays_is_refused(tmp_path):
    path = _written(tmp_path, _table(tmp_path, None))
    with open(path, "ab") as sink:
        sink.write(b"\0" * 64)
    with pytest.raises(TableFileError, match="where its arrays end"):
        _mapped(path)


def test_the_identity_of_the_index_is_checked(tmp_path):
    path = str(tmp_path / "table.bin")
    with open(path, "wb") as sink:
        write_table(_table(tmp_path, None), sink, identity="index A")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert len(map_table(fd, path, "index A")) > 10
        with pytest.raises(TableFileError, match="another index"):
            map_table(fd, path, "index B")
    finally:
        os.close(fd)
