"""Compression names, validation, round trips and byte-compatibility with MosaicML Streaming's shards."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys

import pytest
import xxhash
import zstandard

from streaming.format.compression import (
    check_compression,
    compress,
    decompress,
    get_compression_extension,
    get_compressions,
    is_compression,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "compression")
REFERENCE_SETS = ["mds_zstd", "mds_zstd_7", "mds_br_5", "mds_bz2", "mds_snappy", "mds_gz"]
SAMPLE = b"".join(b"sample %d: %s\n" % (i, b"abc" * (i % 7)) for i in range(400))


def _reference(name: str) -> tuple[dict, bytes]:
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "shard.json")) as file:
        entry = json.load(file)
    with open(os.path.join(folder, entry["zip_data"]["basename"]), "rb") as file:
        return entry, file.read()


def test_names_are_every_family_and_level():
    expected = (
        {"br", "bz2", "gz", "snappy", "zstd"}
        | {f"br:{i}" for i in range(12)}
        | {f"bz2:{i}" for i in range(1, 10)}
        | {f"gz:{i}" for i in range(10)}
        | {f"zstd:{i}" for i in range(1, 23)}
    )
    assert get_compressions() == expected
    assert len(expected) == 58


@pytest.mark.parametrize("name", [None, "zstd", "zstd:1", "zstd:22", "br:0", "br:11", "bz2:1", "gz:0", "snappy"])
def test_valid_names(name):
    assert is_compression(name)
    assert check_compression(name) == name


@pytest.mark.parametrize(
    "name", ["zstd:0", "zstd:23", "br:12", "bz2:0", "gz:10", "snappy:1", "lz4", "ZSTD", "zstd:", ":3", 3, ["zstd"]]
)
def test_invalid_names(name):
    assert not is_compression(name)
    with pytest.raises(ValueError, match=r"Valid algorithms: br or br:0\.\.br:11 .*zstd or zstd:1\.\.zstd:22"):
        check_compression(name)
    with pytest.raises(ValueError, match="is not a supported compression algorithm"):
        compress(name, b"x")
    with pytest.raises(ValueError, match="is not a supported compression algorithm"):
        decompress(name, b"x")


def test_empty_string_means_no_compression():
    assert check_compression("") is None
    assert check_compression(None) is None


@pytest.mark.parametrize(
    ("name", "extension"),
    [("zstd:7", "zstd"), ("zstd", "zstd"), ("br:5", "br"), ("gz", "gz"), ("bz2:3", "bz2"), ("snappy", "snappy")],
)
def test_extension_is_the_family(name, extension):
    assert get_compression_extension(name) == extension


def test_extension_of_unknown_name_raises():
    with pytest.raises(ValueError, match="^zip is not a supported compression algorithm"):
        get_compression_extension("zip")


def test_none_passes_data_through():
    assert compress(None, SAMPLE) is SAMPLE
    assert decompress(None, SAMPLE) is SAMPLE


@pytest.mark.parametrize("name", sorted(get_compressions()))
def test_round_trip_every_algorithm(name):
    packed = compress(name, SAMPLE)
    assert isinstance(packed, bytes)
    if name != "gz:0":  # level 0 stores the data uncompressed
        assert len(packed) < len(SAMPLE)
    assert decompress(name, packed) == SAMPLE
    assert decompress(name, memoryview(packed)) == SAMPLE


@pytest.mark.parametrize("name", ["zstd", "gz", "br", "bz2", "snappy"])
def test_round_trip_empty_and_memoryview_input(name):
    assert decompress(name, compress(name, b"")) == b""
    assert decompress(name, compress(name, memoryview(SAMPLE))) == SAMPLE


def test_levels_change_the_output():
    assert compress("zstd:1", SAMPLE) != compress("zstd:19", SAMPLE)
    assert compress("zstd", SAMPLE) == compress("zstd:3", SAMPLE)
    assert compress("br", SAMPLE) == compress("br:11", SAMPLE)
    assert compress("gz", SAMPLE) == compress("gz:9", SAMPLE)
    assert compress("bz2", SAMPLE) == compress("bz2:9", SAMPLE)


@pytest.mark.parametrize("name", REFERENCE_SETS)
def test_reference_shard_decompresses_to_the_indexed_raw_file(name):
    entry, zipped = _reference(name)
    raw = decompress(entry["compression"], zipped)
    assert len(raw) == entry["raw_data"]["bytes"]
    assert hashlib.sha256(raw).hexdigest() == entry["raw_data"]["hashes"]["sha256"]
    assert xxhash.xxh3_64_hexdigest(raw) == entry["raw_data"]["hashes"]["xxh3_64"]
    assert hashlib.sha256(zipped).hexdigest() == entry["zip_data"]["hashes"]["sha256"]


@pytest.mark.parametrize("name", [n for n in REFERENCE_SETS if n != "mds_gz"])
def test_compression_is_byte_identical_to_the_reference(name):
    entry, zipped = _reference(name)
    raw = decompress(entry["compression"], zipped)
    assert compress(entry["compression"], raw) == zipped


def test_gzip_matches_the_reference_except_the_modification_time():
    entry, zipped = _reference("mds_gz")
    raw = decompress(entry["compression"], zipped)
    ours = compress(entry["compression"], raw)
    assert gzip.decompress(ours) == raw
    assert ours[4:8] == b"\0\0\0\0"
    assert zipped[4:8] != b"\0\0\0\0"
    assert ours[:4] + ours[8:] == zipped[:4] + zipped[8:]


@pytest.mark.parametrize("level", [0, 1, 5, 9])
def test_gzip_is_deterministic_and_readable_by_the_stdlib(level):
    ours = compress(f"gz:{level}", SAMPLE)
    assert ours == compress(f"gz:{level}", SAMPLE)
    assert gzip.decompress(ours) == SAMPLE
    stdlib = gzip.compress(SAMPLE, level, mtime=1)
    assert ours[:4] + ours[8:] == stdlib[:4] + stdlib[8:]


def test_zstd_frame_has_content_size_and_no_checksum():
    params = zstandard.get_frame_parameters(compress("zstd:7", SAMPLE))
    assert params.content_size == len(SAMPLE)
    assert not params.has_checksum


def test_zstd_decompresses_frames_without_content_size():
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(SAMPLE)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress("zstd", frame) == SAMPLE


def test_zstd_decompresses_every_concatenated_frame():
    with_size = zstandard.ZstdCompressor().compress(b"first;")
    without_size = zstandard.ZstdCompressor(write_content_size=False).compress(b"second")
    assert decompress("zstd", with_size + without_size) == b"first;second"


def test_truncated_zstd_raises():
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(SAMPLE)
    with pytest.raises(ValueError, match="truncated"):
        decompress("zstd", frame[:-8])


def test_import_does_not_load_codecs():
    code = (
        "import sys, streaming.format.compression as c; "
        "print(sorted(m for m in ('zstandard', 'brotli', 'cramjam') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_large_zstd_inputs_use_the_thread_count_independent_parallel_frame(monkeypatch):
    import numpy as np
    import zstandard

    from streaming.format import compression

    data = np.random.default_rng(0).integers(0, 300, 3 << 20, dtype=np.int32).tobytes()
    assert len(data) >= compression.ZSTD_PARALLEL_BYTES
    ours = compression.compress("zstd", data)
    assert zstandard.frame_content_size(ours) == len(data) and compression.decompress("zstd", ours) == data
    for threads in (1, 4):
        monkeypatch.setattr(compression, "_zstd_threads", lambda threads=threads: threads)
        compression._zstd_codecs.compressors.clear()
        assert compression.compress("zstd", data) == ours
    small = data[: compression.ZSTD_PARALLEL_BYTES - 1]
    assert compression.compress("zstd", small) == zstandard.ZstdCompressor(
        level=3, write_content_size=True, write_checksum=False
    ).compress(small)
