"""Upstream path `streaming.base.format.xsv.encodings`: the same registry and classes."""

from streaming.format.xsv.encodings import (
    Encoding,
    Float,
    Int,
    Str,
    _encodings,
    is_xsv_encoding,
    xsv_decode,
    xsv_encode,
)

__all__ = ["Encoding", "Float", "Int", "Str", "_encodings", "is_xsv_encoding", "xsv_decode", "xsv_encode"]
