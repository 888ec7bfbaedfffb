"""Shard compression: the algorithm names of `index.json` and the codecs behind them.

An algorithm name is a family (also the file extension) with an optional level: ``zstd``, ``zstd:7``,
``br:5``, ``gz``, ``bz2:1``, ``snappy``. The output is byte-identical to MosaicML Streaming's for every
family except ``gz``, whose header carries a modification time: upstream stamps the current time, this
module stamps 0 so that the same shard always compresses to the same bytes (and the same hashes).

Codec modules are imported on first use, so importing this module costs nothing.

Upstream's classes (``Zstandard(level=7).compress(data)``, ``Compression.each()``, …) are here too, over the
same codecs: an instance compresses exactly as ``compress("<extension>:<level>", data)`` does.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    # Only for annotations: the codec itself is imported on first use (see `_import`).
    import zstandard

__all__ = [
    "Brotli",
    "Bzip2",
    "Compression",
    "Gzip",
    "LevelledCompression",
    "OutputTooLargeError",
    "Snappy",
    "Zstandard",
    "check_compression",
    "compress",
    "decompress",
    "get_compression_extension",
    "get_compressions",
    "is_compression",
]


class _Family(NamedTuple):
    """One compression family: its levels (empty when it has none) and the level its bare name means."""

    levels: range
    default: int | None


_FAMILIES: dict[str, _Family] = {
    "br": _Family(range(0, 12), 11),
    "bz2": _Family(range(1, 10), 9),
    "gz": _Family(range(0, 10), 9),
    "snappy": _Family(range(0), None),
    "zstd": _Family(range(1, 23), 3),
}


def _expand_names() -> dict[str, tuple[str, int | None]]:
    """Map every accepted algorithm name to its (family, level)."""
    names: dict[str, tuple[str, int | None]] = {}
    for family, spec in _FAMILIES.items():
        names[family] = (family, spec.default)
        for level in spec.levels:
            names[f"{family}:{level}"] = (family, level)
    return names


_ALGORITHMS = _expand_names()


def _describe_valid() -> str:
    """Human-readable list of the accepted names, for error messages."""
    parts = []
    for family, spec in _FAMILIES.items():
        if spec.levels:
            parts.append(
                f"{family} or {family}:{spec.levels[0]}..{family}:{spec.levels[-1]} (default level {spec.default})"
            )
        else:
            parts.append(family)
    return "; ".join(parts)


def _parse(algo: object) -> tuple[str, int | None]:
    """Return (family, level) of a valid algorithm name, else raise ValueError naming the valid ones."""
    try:
        return _ALGORITHMS[algo]  # type: ignore[index]  # any object may come in; a non-string is caught below
    except (KeyError, TypeError):
        raise ValueError(
            f"{algo} is not a supported compression algorithm. Valid algorithms: {_describe_valid()}."
        ) from None


def get_compressions() -> set[str]:
    """Return every accepted algorithm name (each family alone and with each of its levels)."""
    return set(_ALGORITHMS)


def is_compression(algo: str | None) -> bool:
    """Return whether ``algo`` is a valid compression setting; ``None`` (no compression) counts as valid."""
    if algo is None:
        return True
    try:
        return algo in _ALGORITHMS
    except TypeError:
        return False


def check_compression(algo: str | None) -> str | None:
    """Validate a writer's ``compression`` argument: return it unchanged, or ``None`` for ``None``/``''``.

    Raises:
        ValueError: the name is not an accepted algorithm (the message lists the families and level ranges).
    """
    if algo is None or algo == "":
        return None
    if not is_compression(algo):
        raise ValueError(f"Invalid compression: {algo}. Valid algorithms: {_describe_valid()}.")
    return algo


def get_compression_extension(algo: str) -> str:
    """Return the file extension of an algorithm: its family name, e.g. ``zstd`` for ``zstd:7``."""
    return _parse(algo)[0]


@cache
def _import(name: str) -> ModuleType:
    """Import a codec module once."""
    import importlib

    return importlib.import_module(name)


class _ZstdCodecs(threading.local):
    """Per-thread zstandard compressors (by level and mode) and decompressor: they are not thread-safe."""

    def __init__(self) -> None:
        self.compressors: dict[tuple[int, int], zstandard.ZstdCompressor] = {}
        self.decompressor: zstandard.ZstdDecompressor | None = None


_zstd_codecs = _ZstdCodecs()

#: Inputs at least this large are compressed in zstd's multi-threaded mode.
ZSTD_PARALLEL_BYTES = 8 << 20


def _zstd_threads() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cpus, 8))


def _zstd_compress(data: bytes, level: int) -> bytes:
    """One zstd frame with the content size and no checksum, as the reference `zstd.compress` writes.

    Below `ZSTD_PARALLEL_BYTES` the bytes are exactly the reference's (single-threaded zstd). Larger inputs
    use zstd's multi-threaded mode on every core: a standard frame that any zstd decoder (the reference's
    included) reads, whose bytes are the same for any number of threads, but not the single-threaded bytes.
    """
    threads = _zstd_threads() if len(data) >= ZSTD_PARALLEL_BYTES else 0
    compressor = _zstd_codecs.compressors.get((level, threads))
    if compressor is None:
        zstandard = _import("zstandard")
        compressor = zstandard.ZstdCompressor(
            level=level, write_content_size=True, write_checksum=False, threads=threads
        )
        _zstd_codecs.compressors[level, threads] = compressor
    return compressor.compress(data)


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    """Decompress one or more zstd frames, with or without a content size in their headers."""
    zstandard = _import("zstandard")
    decompressor = _zstd_codecs.decompressor
    if decompressor is None:
        decompressor = _zstd_codecs.decompressor = zstandard.ZstdDecompressor()
    try:
        return decompressor.decompress(data, allow_extra_data=False)
    except zstandard.ZstdError:
        pass
    parts = []
    rest = bytes(data)
    while rest:
        stream = decompressor.decompressobj()
        parts.append(stream.decompress(rest))
        if not stream.eof:
            raise ValueError("zstd data is truncated: the last frame does not end.")
        rest = stream.unused_data
    return b"".join(parts)


_GZIP_TRAILER = struct.Struct("<II")


def _gzip_compress(data: bytes, level: int) -> bytes:
    """A single gzip member laid out as Python's `gzip.compress` writes it, with modification time 0."""
    extra_flags = 2 if level == 9 else 4 if level == 1 else 0
    header = bytes((0x1F, 0x8B, 8, 0, 0, 0, 0, 0, extra_flags, 0xFF))
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    return header + body + _GZIP_TRAILER.pack(zlib.crc32(data), len(data) & 0xFFFFFFFF)


def _compressor(family: str) -> Callable[[bytes, int | None], bytes]:
    """Return the compress function of a family, taking (data, level)."""
    if family == "zstd":
        return _zstd_compress  # type: ignore[return-value]  # zstd always has a level (default 3), never None
    if family == "gz":
        return _gzip_compress  # type: ignore[return-value]  # gz always has a level (default 9), never None
    if family == "br":
        # brotli takes only contiguous buffers; memoryview() (not bytes()) so that an int is refused, not zeros.
        return lambda data, level: _import("brotli").compress(
            data if isinstance(data, bytes) else bytes(memoryview(data)), quality=level
        )
    if family == "bz2":
        return lambda data, level: _import("bz2").compress(data, level)
    return lambda data, level: bytes(_import("cramjam").snappy.compress_raw(data))


def _decompressor(family: str) -> Callable[[bytes | memoryview], bytes]:
    """Return the decompress function of a family."""
    if family == "zstd":
        return _zstd_decompress
    if family == "gz":
        return lambda data: _import("gzip").decompress(data)
    if family == "br":
        return lambda data: _import("brotli").decompress(data)
    if family == "bz2":
        return lambda data: _import("bz2").decompress(data)
    return lambda data: bytes(_import("cramjam").snappy.decompress_raw(data))


class OutputTooLargeError(ValueError):
    """Decompressed data that grows past the size its index declares (a decompression bomb or a corrupt file)."""


#: Bytes read from a streaming decompressor at a time.
_CHUNK = 1 << 20


def _too_large(limit: int) -> OutputTooLargeError:
    return OutputTooLargeError(f"the data decompresses to more than the {limit} bytes declared")


def _zstd_bounded(data: bytes | memoryview, limit: int) -> bytes:
    """zstd frames read through a stream reader, so a frame stating a huge content size allocates nothing."""
    zstandard = _import("zstandard")
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True, read_size=_CHUNK)
    with reader:
        out = reader.read(limit + 1)
        while len(out) <= limit:
            more = reader.read(limit + 1 - len(out))
            if not more:
                break
            out += more
    if len(out) > limit:
        raise _too_large(limit)
    return out


def iter_decompress(algo: str, data: bytes | memoryview, max_size: int, chunk: int = _CHUNK) -> Iterator[bytes]:
    """The decompressed bytes of ``data`` in pieces of at most ``chunk`` bytes, never more than ``max_size`` in all.

    For callers that hash, count or parse the output as it comes (``rebuild-index``: no index declares the
    size yet), so memory stays at one piece whatever the data says about itself.

    Raises:
        OutputTooLargeError: the output passes ``max_size``.
        ValueError: unknown algorithm, or truncated data. Corrupt data raises the codec's own error.
    """
    family, _ = _parse(algo)
    produced = 0
    for piece in _PIECES[family](data, chunk):
        produced += len(piece)
        if produced > max_size:
            raise _too_large(max_size)
        yield piece


def _zstd_pieces(data: bytes | memoryview, chunk: int) -> Iterator[bytes]:
    zstandard = _import("zstandard")
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True, read_size=_CHUNK)
    with reader:
        while piece := reader.read(chunk):
            yield piece


def _members_pieces(data: bytes | memoryview, chunk: int, new: Callable[[], object], name: str) -> Iterator[bytes]:
    """Concatenated members (gzip) or streams (bz2), each through a decompressor with ``max_length``."""
    rest = bytes(data)
    while rest:
        stream = new()
        pending = rest
        while True:
            piece = stream.decompress(pending, chunk)  # type: ignore[attr-defined]
            if piece:
                yield piece
            if stream.eof:  # type: ignore[attr-defined]
                break
            # zlib keeps input it has not consumed in ``unconsumed_tail``; bz2 keeps it internally.
            pending = getattr(stream, "unconsumed_tail", b"")
            if not piece and not pending and getattr(stream, "needs_input", True):
                raise ValueError(f"{name} data is truncated: the last member does not end.")
        rest = stream.unused_data  # type: ignore[attr-defined]


def _gzip_pieces(data: bytes | memoryview, chunk: int) -> Iterator[bytes]:
    return _members_pieces(data, chunk, lambda: zlib.decompressobj(wbits=31), "gz")


def _bz2_pieces(data: bytes | memoryview, chunk: int) -> Iterator[bytes]:
    return _members_pieces(data, chunk, _import("bz2").BZ2Decompressor, "bz2")


def _brotli_pieces(data: bytes | memoryview, chunk: int) -> Iterator[bytes]:
    decompressor = _import("brotli").Decompressor()
    piece = decompressor.process(bytes(data), output_buffer_limit=chunk)
    while True:
        if piece:
            yield piece
        if decompressor.is_finished() or decompressor.can_accept_more_data():
            break
        piece = decompressor.process(b"", output_buffer_limit=chunk)
    if not decompressor.is_finished():
        raise ValueError("br data is truncated: the stream does not end.")


def _snappy_pieces(data: bytes | memoryview, chunk: int) -> Iterator[bytes]:
    """Raw snappy is one block whose output size is stated up front (and at most ~21 times the input)."""
    yield bytes(_import("cramjam").snappy.decompress_raw(data))


_PIECES: dict[str, Callable[[bytes | memoryview, int], Iterator[bytes]]] = {
    "zstd": _zstd_pieces,
    "gz": _gzip_pieces,
    "br": _brotli_pieces,
    "bz2": _bz2_pieces,
    "snappy": _snappy_pieces,
}


def _joined_bounded(family: str) -> Callable[[bytes | memoryview, int], bytes]:
    return lambda data, limit: b"".join(iter_decompress(family, data, limit))


def _snappy_bounded(data: bytes | memoryview, limit: int) -> bytes:
    """Raw snappy states its output size up front: check it before allocating."""
    snappy = _import("cramjam").snappy
    if snappy.decompress_raw_len(bytes(data)) > limit:
        raise _too_large(limit)
    return bytes(snappy.decompress_raw(data))


_BOUNDED: dict[str, Callable[[bytes | memoryview, int], bytes]] = {
    "zstd": _zstd_bounded,
    "gz": _joined_bounded("gz"),
    "br": _joined_bounded("br"),
    "bz2": _joined_bounded("bz2"),
    "snappy": _snappy_bounded,
}


_COMPRESSORS = {family: _compressor(family) for family in _FAMILIES}
_DECOMPRESSORS = {family: _decompressor(family) for family in _FAMILIES}


def compress(algo: str | None, data: bytes | memoryview) -> bytes:
    """Compress ``data`` with the named algorithm; ``None`` returns the data unchanged.

    Raises:
        ValueError: unknown algorithm name.
    """
    if algo is None:
        return data  # type: ignore[return-value]  # unchanged on purpose: no copy of a memoryview the caller gave
    family, level = _parse(algo)
    return _COMPRESSORS[family](data, level)  # type: ignore[arg-type]  # every codec accepts a memoryview too


def decompress(algo: str | None, data: bytes | memoryview, max_size: int | None = None) -> bytes:
    """Decompress ``data`` written with the named algorithm (any level); ``None`` returns it unchanged.

    With ``max_size``, decompression streams and stops as soon as the output would pass ``max_size`` bytes,
    so untrusted data never allocates more than that (whatever size a frame header claims).

    Raises:
        OutputTooLargeError: the output passes ``max_size``.
        ValueError: unknown algorithm name, or truncated data. Corrupt data raises the codec's own error.
    """
    if algo is None:
        return data  # type: ignore[return-value]  # unchanged on purpose: no copy of a memoryview the caller gave
    family, _ = _parse(algo)
    if max_size is not None:
        return _BOUNDED[family](data, max_size)
    return _DECOMPRESSORS[family](data)


class Compression(ABC):
    """A compression family without levels (upstream's base class); ``extension`` is its algorithm name."""

    extension: str = ""

    @classmethod
    def each(cls) -> Iterator[tuple[str, Compression]]:
        """Yield (algorithm name, instance) for every setting of this family."""
        yield cls.extension, cls()

    @abstractmethod
    def compress(self, data: bytes) -> bytes:
        """Return ``data`` compressed."""

    @abstractmethod
    def decompress(self, data: bytes) -> bytes:
        """Return the data that ``compress`` turned into ``data``."""


class LevelledCompression(Compression):
    """A compression family with levels; a subclass sets ``extension`` and ``levels``.

    Args:
        level: one of ``levels``; ``None`` means the family's default level.

    Raises:
        ValueError: a level the family does not have.
    """

    levels: list = []

    def __init__(self, level: int | None = None) -> None:
        family = _FAMILIES.get(self.extension)
        if family is None:
            raise TypeError(f"{type(self).__name__} names no known compression family ({self.extension!r})")
        if level is None:
            level = family.default
        if level not in self.levels:
            raise ValueError(
                f"{self.extension} compression levels are {self.levels[0]}..{self.levels[-1]}, got {level!r}"
            )
        self.level = level

    @classmethod
    def each(cls) -> Iterator[tuple[str, Compression]]:
        yield cls.extension, cls()
        for level in cls.levels:
            yield f"{cls.extension}:{level}", cls(level)

    def compress(self, data: bytes) -> bytes:
        return _COMPRESSORS[self.extension](data, self.level)

    def decompress(self, data: bytes) -> bytes:
        return _DECOMPRESSORS[self.extension](data)


class Brotli(LevelledCompression):
    """``br``: Brotli, levels 0..11 (default 11)."""

    extension = "br"
    levels = list(_FAMILIES["br"].levels)

    def __init__(self, level: int = 11) -> None:
        super().__init__(level)


class Bzip2(LevelledCompression):
    """``bz2``: bzip2, levels 1..9 (default 9)."""

    extension = "bz2"
    levels = list(_FAMILIES["bz2"].levels)

    def __init__(self, level: int = 9) -> None:
        super().__init__(level)


class Gzip(LevelledCompression):
    """``gz``: gzip, levels 0..9 (default 9), with modification time 0 in the header."""

    extension = "gz"
    levels = list(_FAMILIES["gz"].levels)

    def __init__(self, level: int = 9) -> None:
        super().__init__(level)


class Snappy(Compression):
    """``snappy``: raw Snappy blocks, no levels."""

    extension = "snappy"

    def compress(self, data: bytes) -> bytes:
        return _COMPRESSORS["snappy"](data, None)

    def decompress(self, data: bytes) -> bytes:
        return _DECOMPRESSORS["snappy"](data)


class Zstandard(LevelledCompression):
    """``zstd``: Zstandard, levels 1..22 (default 3)."""

    extension = "zstd"
    levels = list(_FAMILIES["zstd"].levels)

    def __init__(self, level: int = 3) -> None:
        super().__init__(level)
