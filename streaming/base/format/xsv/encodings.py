"""Upstream path `streaming.base.format.xsv.encodings`: re-exports."""

from streaming.format.xsv.encodings import is_xsv_encoding, xsv_decode, xsv_encode

__all__ = ["is_xsv_encoding", "xsv_decode", "xsv_encode"]
