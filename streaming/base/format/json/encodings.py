"""Upstream path `streaming.base.format.json.encodings`: the same registry and classes."""

from streaming.format.json.encodings import Encoding, Float, Int, Str, _encodings, is_json_encoded, is_json_encoding

__all__ = ["Encoding", "Float", "Int", "Str", "_encodings", "is_json_encoded", "is_json_encoding"]
