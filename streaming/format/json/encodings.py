"""Column encodings of the JSON shard format: which Python values a ``str``, ``int`` or ``float`` column accepts.

The JSON writer stores values as they are (one JSON object per line); these checks only guard the declared
types. The checks are ``isinstance`` checks, as in MosaicML Streaming, so ``bool`` passes as ``int``.
The registry is upstream's: the dict ``_encodings`` of name → :class:`Encoding` subclass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["Encoding", "Float", "Int", "Str", "get_json_encodings", "is_json_encoded", "is_json_encoding"]


class Encoding(ABC):
    """The check of one JSON column type."""

    @classmethod
    @abstractmethod
    def is_encoded(cls, obj: Any) -> bool:
        """Return whether ``obj`` has the Python type this column stores."""


class Str(Encoding):
    """``str`` columns."""

    @classmethod
    def is_encoded(cls, obj: Any) -> bool:
        return isinstance(obj, str)


class Int(Encoding):
    """``int`` columns (``bool`` passes, as it is an ``int``)."""

    @classmethod
    def is_encoded(cls, obj: Any) -> bool:
        return isinstance(obj, int)


class Float(Encoding):
    """``float`` columns."""

    @classmethod
    def is_encoded(cls, obj: Any) -> bool:
        return isinstance(obj, float)


_encodings: dict[str, type[Encoding]] = {"str": Str, "int": Int, "float": Float}


def get_json_encodings() -> set[str]:
    """Return the JSON column encodings: ``str``, ``int`` and ``float``."""
    return set(_encodings)


def is_json_encoding(encoding: str) -> bool:
    """Return whether ``encoding`` is a JSON column encoding."""
    return isinstance(encoding, str) and encoding in _encodings


def is_json_encoded(encoding: str, value: Any) -> bool:
    """Return whether ``value`` has the Python type the JSON ``encoding`` stores.

    Raises:
        ValueError: ``encoding`` is not a JSON encoding (the message lists the valid ones).
    """
    if not is_json_encoding(encoding):
        raise ValueError(f"Unknown JSON encoding {encoding!r}. Valid encodings: {', '.join(_encodings)}.")
    return _encodings[encoding].is_encoded(value)
