"""Upstream path `streaming.base.format.json.encodings`: re-exports."""

from streaming.format.json.encodings import is_json_encoded, is_json_encoding

__all__ = ["is_json_encoded", "is_json_encoding"]
