"""Upstream path `streaming.base.compression`: re-exports."""

from streaming.format.compression import (
    compress,
    decompress,
    get_compression_extension,
    get_compressions,
    is_compression,
)

__all__ = ["compress", "decompress", "get_compression_extension", "get_compressions", "is_compression"]
