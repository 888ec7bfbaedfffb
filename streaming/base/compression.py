"""Upstream path `streaming.base.compression`: re-exports."""

from streaming.format.compression import (
    Brotli,
    Bzip2,
    Compression,
    Gzip,
    LevelledCompression,
    Snappy,
    Zstandard,
    compress,
    decompress,
    get_compression_extension,
    get_compressions,
    is_compression,
)

__all__ = [
    "Brotli",
    "Bzip2",
    "Compression",
    "Gzip",
    "LevelledCompression",
    "Snappy",
    "Zstandard",
    "compress",
    "decompress",
    "get_compression_extension",
    "get_compressions",
    "is_compression",
]
