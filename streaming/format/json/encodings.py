"""Column encodings of the JSON shard format: which Python values a ``str``, ``int`` or ``float`` column accepts.

The JSON writer stores values as they are (one JSON object per line); these checks only guard the declared
types. The checks are ``isinstance`` checks, as in MosaicML Streaming, so ``bool`` passes as ``int``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["get_json_encodings", "is_json_encoded", "is_json_encoding"]

_TYPES: dict[str, type] = {"str": str, "int": int, "float": float}


def get_json_encodings() -> set[str]:
    """Return the JSON column encodings: ``str``, ``int`` and ``float``."""
    return set(_TYPES)


def is_json_encoding(encoding: str) -> bool:
    """Return whether ``encoding`` is a JSON column encoding."""
    return isinstance(encoding, str) and encoding in _TYPES


def is_json_encoded(encoding: str, value: Any) -> bool:
    """Return whether ``value`` has the Python type the JSON ``encoding`` stores.

    Raises:
        ValueError: ``encoding`` is not a JSON encoding (the message lists the valid ones).
    """
    if not is_json_encoding(encoding):
        raise ValueError(f"Unknown JSON encoding {encoding!r}. Valid encodings: {', '.join(_TYPES)}.")
    return isinstance(value, _TYPES[encoding])
