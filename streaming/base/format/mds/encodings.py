"""Upstream path `streaming.base.format.mds.encodings`: the very same registry objects, so
``_encodings['name'] = MyEncoding`` registers a custom encoding here too."""

from streaming.format.mds.encodings import (
    Encoding,
    _encodings,
    _unsafe_encodings,
    get_mds_coder,
    get_mds_encoded_size,
    get_mds_encodings,
    is_mds_encoding,
    is_mds_encoding_safe,
    mds_decode,
    mds_encode,
    register_mds_encoding,
)

__all__ = [
    "Encoding",
    "_encodings",
    "_unsafe_encodings",
    "get_mds_coder",
    "get_mds_encoded_size",
    "get_mds_encodings",
    "is_mds_encoding",
    "is_mds_encoding_safe",
    "mds_decode",
    "mds_encode",
    "register_mds_encoding",
]
