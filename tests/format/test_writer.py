"""Writers: arguments, shard cutting, and bad input that fails clearly without losing what was written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from streaming import JSONWriter, LocalDataset, MDSWriter, XSVWriter


def _index(out):
    with open(os.path.join(out, "index.json")) as f:
        return json.load(f)


def test_worked_example_bytes(out_dir):
    with MDSWriter(out=out_dir, columns={"words": "str", "number": "int"}, hashes=["sha1", "xxh64"]) as w:
        w.write({"number": 7, "words": "hi"})
        w.write({"number": -1, "words": "abc"})
    with open(os.path.join(out_dir, "shard.00000.mds"), "rb") as f:
        data = f.read()
    assert len(data) == 250
    assert data[:16].hex() == "02000000dd000000eb000000fa000000"
    assert data[221:].hex() == "020000000700000000000000686903000000ffffffffffffffff616263"
    entry = _index(out_dir)["shards"][0]
    assert entry["raw_data"]["hashes"] == {
        "sha1": "8a6770da95458fcff44f7ee005db25f155890174",
        "xxh64": "772598b0f4615b7b",
    }


def test_size_limit_string_and_zero_sample_first_shard(out_dir):
    with MDSWriter(out=out_dir, columns={"x": "bytes"}, size_limit="100b") as w:
        for _ in range(5):
            w.write({"x": bytes(10)})
    assert [s["samples"] for s in _index(out_dir)["shards"]] == [0, 1, 1, 1, 1, 1]
    assert _index(out_dir)["shards"][0]["size_limit"] == 100
    assert len(LocalDataset(out_dir)) == 5


@pytest.mark.parametrize("limit", [1 << 32, "4gb", "5gb"])
def test_size_limit_of_4gib_or_more_is_refused(out_dir, limit):
    with pytest.raises(ValueError, match=r"^`size_limit` must be less than 2\*\*32, instead, found as \d+"):
        MDSWriter(out=out_dir, columns={"x": "int"}, size_limit=limit)


def test_size_limit_none_means_one_shard(out_dir):
    with MDSWriter(out=out_dir, columns={"x": "int"}, size_limit=None) as w:
        for i in range(1000):
            w.write({"x": i})
    assert len(_index(out_dir)["shards"]) == 1 and _index(out_dir)["shards"][0]["size_limit"] is None


def test_wrong_type_names_column_encoding_and_sample_and_keeps_the_rest(out_dir):
    with MDSWriter(out=out_dir, columns={"tokens": "ndarray:int32", "id": "int"}) as w:
        w.write({"tokens": np.arange(3, dtype=np.int32), "id": 0})
        with pytest.raises(Exception) as err:
            w.write({"tokens": np.arange(3, dtype=np.int64), "id": 1})
        message = str(err.value)
        assert "'tokens'" in message and "ndarray:int32" in message and "sample 1" in message
        with pytest.raises(TypeError, match=r"Column 'id' \(encoding 'int'\) of sample 1"):
            w.write({"tokens": np.arange(3, dtype=np.int32), "id": "seven"})
        w.write({"tokens": np.arange(4, dtype=np.int32), "id": 2})
    dataset = LocalDataset(out_dir)
    assert [s["id"] for s in dataset] == [0, 2]


def test_missing_column_is_named(out_dir):
    with MDSWriter(out=out_dir, columns={"a": "int", "b": "str"}) as w:
        with pytest.raises(KeyError, match="Sample 0 has no column 'b'"):
            w.write({"a": 1})


def test_fixed_size_mismatch_is_named(out_dir):
    with MDSWriter(out=out_dir, columns={"v": "int64"}) as w:
        with pytest.raises(ValueError, match=r"Column 'v'.*fixed size of 8 bytes"):
            w.write({"v": b"\x00\x01"})


def test_unknown_encoding_lists_valid_ones(out_dir):
    with pytest.raises(ValueError, match=r"unknown MDS encoding 'int33'.*float16.*ndarray"):
        MDSWriter(out=out_dir, columns={"v": "int33"})
    with pytest.raises(TypeError):
        MDSWriter(out=out_dir, columns={"v": "int33"})
    with pytest.raises(ValueError, match="Valid encodings: str, int, float"):
        JSONWriter(out=out_dir, columns={"v": "ndarray"})


def test_unknown_compression_and_hash_list_valid_ones(out_dir):
    with pytest.raises(ValueError, match="zstd"):
        MDSWriter(out=out_dir, columns={"v": "int"}, compression="lz4")
    with pytest.raises(ValueError, match="xxh64"):
        MDSWriter(out=out_dir, columns={"v": "int"}, hashes=["crc32"])


def test_unknown_writer_argument(out_dir):
    with pytest.raises(ValueError, match="Invalid Writer argument"):
        MDSWriter(out=out_dir, columns={"v": "int"}, shuffle=True)


def test_non_empty_out_needs_exist_ok(out_dir):
    os.makedirs(out_dir)
    with open(os.path.join(out_dir, "old.txt"), "w") as f:
        f.write("old")
    with pytest.raises(FileExistsError, match="not empty"):
        MDSWriter(out=out_dir, columns={"v": "int"})
    assert os.path.exists(os.path.join(out_dir, "old.txt"))
    with MDSWriter(out=out_dir, columns={"v": "int"}, exist_ok=True) as w:
        w.write({"v": 1})
    assert sorted(os.listdir(out_dir)) == ["index.json", "shard.00000.mds"]


def test_exception_in_with_block_indexes_accepted_samples(out_dir):
    with pytest.raises(RuntimeError, match="boom"):
        with MDSWriter(out=out_dir, columns={"v": "int"}, size_limit=200) as w:
            for i in range(50):
                w.write({"v": i})
            raise RuntimeError("boom")
    assert [s["v"] for s in LocalDataset(out_dir)] == list(range(50))


def test_xsv_refuses_separator_in_values(out_dir):
    with XSVWriter(out=out_dir, columns={"a": "str"}, separator="|") as w:
        with pytest.raises(ValueError, match=r"Column 'a' of sample 0 contains the separator"):
            w.write({"a": "x|y"})
        w.write({"a": "xy"})
    assert LocalDataset(out_dir)[0] == {"a": "xy"}


def test_full_disk_keeps_finished_shards_readable(tmp_path):
    """A real write failure (file size limit, EFBIG) mid-way: the index names only complete shards."""
    out = str(tmp_path / "out")
    script = textwrap.dedent(f"""
        import resource, signal
        from streaming import MDSWriter
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        w = MDSWriter(out={out!r}, columns={{"x": "bytes"}}, size_limit=10_000_000)
        try:
            for i in range(30):
                w.write({{"x": bytes(3_000)}})
            w.flush_shard()
            w.write({{"x": bytes(300_000)}})
            w.finish()
        except OSError as err:
            print("raised", err.errno)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert "raised 27" in result.stdout, result.stderr
    dataset = LocalDataset(out)
    assert len(dataset) == 30 and dataset[29]["x"] == bytes(3_000)
    assert not [f for f in os.listdir(out) if f.startswith("shard.00001")]


def test_write_encoded_batch_matches_write(tmp_path):
    samples = [{"id": i, "text": "x" * (i % 7)} for i in range(500)]
    with MDSWriter(out=str(tmp_path / "a"), columns={"id": "int", "text": "str"}, size_limit=2000) as w:
        for sample in samples:
            w.write(sample)
    encoded = [MDSWriter.encode_sample(w, sample) for sample in samples]
    with MDSWriter(out=str(tmp_path / "b"), columns={"id": "int", "text": "str"}, size_limit=2000) as w2:
        w2.write_encoded_batch(b"".join(encoded[:200]), [len(e) for e in encoded[:200]])
        w2.write_encoded_batch(b"".join(encoded[200:]), [len(e) for e in encoded[200:]])
    for name in os.listdir(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.mark.parametrize("size_limit", [120, 1000, None])
def test_write_encoded_batch_cuts_like_write_with_oversized_samples(tmp_path, size_limit):
    samples = [{"text": "y" * (i * 37 % 150)} for i in range(300)]
    with MDSWriter(out=str(tmp_path / "a"), columns={"text": "str"}, size_limit=size_limit) as w:
        for sample in samples:
            w.write(sample)
    encoded = [MDSWriter.encode_sample(w, sample) for sample in samples]
    with MDSWriter(out=str(tmp_path / "b"), columns={"text": "str"}, size_limit=size_limit) as w2:
        for start in range(0, 300, 64):
            part = encoded[start : start + 64]
            w2.write_encoded_batch(b"".join(part), [len(e) for e in part])
    assert sorted(os.listdir(tmp_path / "a")) == sorted(os.listdir(tmp_path / "b"))
    for name in os.listdir(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
