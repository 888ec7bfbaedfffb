"""Hash algorithm names, digests and the writer's ``hashes`` argument check."""

from __future__ import annotations

import hashlib

import pytest
import xxhash

from streaming.format.hashing import check_hashes, get_hash, get_hashes, is_hash

ALL = [
    "md5",
    "sha1",
    "sha224",
    "sha256",
    "sha384",
    "sha512",
    "sha3_224",
    "sha3_256",
    "sha3_384",
    "sha3_512",
    "blake2b",
    "blake2s",
    "xxh32",
    "xxh64",
    "xxh3_64",
    "xxh3_128",
    "xxh128",
]
DATA = bytes(range(256)) * 5


def test_exactly_the_17_upstream_algorithms():
    assert get_hashes() == set(ALL)
    assert len(get_hashes()) == 17


def test_reference_vector():
    assert get_hash("xxh3_64", b"hello") == "9555e8555c62dcfd"


@pytest.mark.parametrize("algo", ALL)
def test_digest_matches_the_library(algo):
    if algo.startswith("xxh"):
        expected = getattr(xxhash, algo)(DATA).hexdigest()
    else:
        expected = hashlib.new(algo, DATA).hexdigest()
    assert is_hash(algo)
    assert get_hash(algo, DATA) == expected
    assert get_hash(algo, memoryview(DATA)) == expected


def test_xxh128_is_xxh3_128():
    assert get_hash("xxh128", DATA) == get_hash("xxh3_128", DATA)


@pytest.mark.parametrize("algo", ["shake_128", "sha512_256", "md5-sha1", "ripemd160", "SHA1", "", None, 5])
def test_other_names_are_rejected(algo):
    assert not is_hash(algo)
    with pytest.raises(
        ValueError, match=r"is not a supported hash algorithm\. Valid algorithms: blake2b, blake2s, md5"
    ):
        get_hash(algo, DATA)


def test_check_hashes_accepts_sorted_unique_lists():
    assert check_hashes(None) == []
    assert check_hashes([]) == []
    assert check_hashes(["sha1", "xxh64"]) == ["sha1", "xxh64"]
    assert check_hashes(("md5",)) == ["md5"]
    assert check_hashes(sorted(ALL)) == sorted(ALL)


def test_check_hashes_names_unknown_algorithms():
    with pytest.raises(ValueError, match=r"^Invalid hash: crc32, sha2\..*.*Valid algorithms: .*xxh3_64"):
        check_hashes(["crc32", "sha1", "sha2"])


def test_check_hashes_requires_sorted_order():
    with pytest.raises(ValueError, match=r"^Hashes must be unique and in sorted order.*pass \['md5', 'sha1'\]"):
        check_hashes(["sha1", "md5"])


def test_check_hashes_requires_unique_names():
    with pytest.raises(ValueError, match=r"^Hashes must be unique and in sorted order.*pass \['sha1'\]"):
        check_hashes(["sha1", "sha1"])


def test_check_hashes_rejects_a_single_string():
    with pytest.raises(TypeError, match="list of algorithm names, got str 'sha1'"):
        check_hashes("sha1")
