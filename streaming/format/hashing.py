"""File hashes recorded in `index.json`: the 17 algorithm names MosaicML Streaming accepts, as hex digests.

Twelve come from hashlib (md5, the sha1/sha2/sha3 families, blake2b, blake2s) and five from xxhash
(xxh32, xxh64, xxh3_64, xxh3_128 and its alias xxh128). The hash functions are looked up on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

__all__ = ["check_hashes", "get_hash", "get_hashes", "is_hash", "new_hasher"]

_HASHLIB_NAMES = (
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
)
_XXHASH_NAMES = ("xxh32", "xxh64", "xxh3_64", "xxh3_128", "xxh128")
_NAMES = frozenset(_HASHLIB_NAMES + _XXHASH_NAMES)


def _hexdigest_of(constructor: Callable[[bytes | memoryview], Any]) -> Callable[[bytes | memoryview], str]:
    """The hex-digest function of one hashlib constructor."""
    return lambda data: constructor(data).hexdigest()


@cache
def _hexdigest_functions() -> dict[str, Callable[[bytes | memoryview], str]]:
    """Map each algorithm name to a function returning the hex digest of a bytes-like object."""
    import hashlib

    import xxhash

    functions: dict[str, Callable[[bytes | memoryview], str]] = {}
    for name in _HASHLIB_NAMES:
        functions[name] = _hexdigest_of(getattr(hashlib, name))
    for name in _XXHASH_NAMES:
        functions[name] = getattr(xxhash, f"{name}_hexdigest")
    return functions


def get_hashes() -> set[str]:
    """Return the names of the supported hash algorithms."""
    return set(_NAMES)


def is_hash(algo: str) -> bool:
    """Return whether ``algo`` names a supported hash algorithm."""
    return isinstance(algo, str) and algo in _NAMES


def _valid_list() -> str:
    return ", ".join(sorted(_NAMES))


def get_hash(algo: str, data: bytes | memoryview) -> str:
    """Return the hex digest of ``data`` under the named algorithm.

    Raises:
        ValueError: unknown algorithm (the message lists the valid ones).
    """
    if not is_hash(algo):
        raise ValueError(f"{algo} is not a supported hash algorithm. Valid algorithms: {_valid_list()}.")
    return _hexdigest_functions()[algo](data)


def new_hasher(algo: str) -> Any:
    """A hash object of the named algorithm (``update(data)``, ``hexdigest()``), for data that arrives in pieces;
    its digest equals `get_hash` of the pieces joined.

    Raises:
        ValueError: unknown algorithm (the message lists the valid ones).
    """
    if not is_hash(algo):
        raise ValueError(f"{algo} is not a supported hash algorithm. Valid algorithms: {_valid_list()}.")
    import hashlib

    import xxhash

    return getattr(hashlib if algo in _HASHLIB_NAMES else xxhash, algo)()


def check_hashes(hashes: Iterable[str] | None) -> list[str]:
    """Validate a writer's ``hashes`` argument and return it as a list (``None`` gives ``[]``).

    Like MosaicML Streaming, the names must already be unique and in sorted order: they are written to the
    index in the order given, so requiring sorted input keeps indexes comparable.

    Raises:
        TypeError: ``hashes`` is a single string or not iterable.
        ValueError: an unknown name (all unknown ones are listed, with the valid names), or a list that is not
            unique and sorted (the message shows the expected list).
    """
    if hashes is None:
        return []
    if isinstance(hashes, (str, bytes)) or not isinstance(hashes, Iterable):
        raise TypeError(f"hashes must be a list of algorithm names, got {type(hashes).__name__} {hashes!r}.")
    names = list(hashes)
    expected = sorted(set(names))
    if names != expected:
        raise ValueError(f"Hashes must be unique and in sorted order. Got {names}; pass {expected} instead.")
    unknown = [name for name in names if not is_hash(name)]
    if unknown:
        raise ValueError(f"Invalid hash: {', '.join(unknown)}. Valid algorithms: {_valid_list()}.")
    return names
