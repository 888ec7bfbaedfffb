"""Column encodings of the CSV/TSV/XSV shard formats: ``str``, ``int`` and ``float`` values as text.

Values are written as their decimal text and read back with the identity, ``int()`` or ``float()``. The
writer accepts only values of the declared type (``isinstance``; ``bool`` passes as ``int``, as upstream).
Subclasses are written as their base type: ``True`` becomes ``1`` (upstream wrote ``True``, which its own
reader could not parse back as an int). The registry is upstream's: the dict ``_encodings`` of name →
:class:`Encoding` subclass, whose classmethods ``encode``/``decode`` convert one field.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from streaming.format.errors import EncodingTypeError

__all__ = ["Encoding", "Float", "Int", "Str", "get_xsv_encodings", "is_xsv_encoding", "xsv_decode", "xsv_encode"]


class Encoding(ABC):
    """The text form of one XSV column type."""

    python_type: type = object

    @classmethod
    def _check(cls, obj: Any, name: str) -> None:
        if not isinstance(obj, cls.python_type):
            raise EncodingTypeError(
                f"data should be of type {cls.python_type}, but instead, found as {type(obj)}: XSV encoding "
                f"{name!r} expects a {cls.python_type.__name__}, got {type(obj).__name__} {obj!r}."
            )

    @classmethod
    @abstractmethod
    def encode(cls, obj: Any) -> str:
        """Return the text of ``obj``; raise ``TypeError`` if it is not of this column's type."""

    @classmethod
    @abstractmethod
    def decode(cls, obj: str) -> Any:
        """Parse the text of one field back into this column's type (``ValueError`` if it does not parse)."""


class Str(Encoding):
    """``str`` columns: the text itself."""

    python_type = str

    @classmethod
    def encode(cls, obj: Any) -> str:
        cls._check(obj, "str")
        return obj

    @classmethod
    def decode(cls, obj: str) -> str:
        return obj


class Int(Encoding):
    """``int`` columns: decimal digits."""

    python_type = int

    @classmethod
    def encode(cls, obj: Any) -> str:
        cls._check(obj, "int")
        return int.__repr__(obj)

    @classmethod
    def decode(cls, obj: str) -> int:
        return int(obj)


class Float(Encoding):
    """``float`` columns: the shortest round-trip text (``repr``)."""

    python_type = float

    @classmethod
    def encode(cls, obj: Any) -> str:
        cls._check(obj, "float")
        return float.__repr__(obj)

    @classmethod
    def decode(cls, obj: str) -> float:
        return float(obj)


_encodings: dict[str, type[Encoding]] = {"str": Str, "int": Int, "float": Float}


def get_xsv_encodings() -> set[str]:
    """Return the XSV column encodings: ``str``, ``int`` and ``float``."""
    return set(_encodings)


def is_xsv_encoding(encoding: str) -> bool:
    """Return whether ``encoding`` is an XSV column encoding."""
    return isinstance(encoding, str) and encoding in _encodings


def _coder(encoding: str) -> type[Encoding]:
    if not is_xsv_encoding(encoding):
        raise ValueError(f"Unknown XSV encoding {encoding!r}. Valid encodings: {', '.join(_encodings)}.")
    return _encodings[encoding]


def xsv_encode(encoding: str, value: Any) -> str:
    """Return the text of ``value`` for a column of the given encoding.

    Raises:
        ValueError: unknown encoding.
        TypeError: ``value`` is not of the encoding's type.
    """
    return _coder(encoding).encode(value)


def xsv_decode(encoding: str, value: str) -> Any:
    """Parse the text of one field back into the encoding's Python type.

    Raises:
        ValueError: unknown encoding, or text that does not parse as the encoding's type.
    """
    return _coder(encoding).decode(value)
