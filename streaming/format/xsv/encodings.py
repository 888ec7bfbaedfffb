"""Column encodings of the CSV/TSV/XSV shard formats: ``str``, ``int`` and ``float`` values as text.

Values are written as their decimal text and read back with the identity, ``int()`` or ``float()``. The
writer accepts only values of the declared type (``isinstance``; ``bool`` passes as ``int``, as upstream).
Subclasses are written as their base type: ``True`` becomes ``1`` (upstream wrote ``True``, which its own
reader could not parse back as an int).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["get_xsv_encodings", "is_xsv_encoding", "xsv_decode", "xsv_encode"]

_TYPES: dict[str, type] = {"str": str, "int": int, "float": float}
_DECODERS: dict[str, Callable[[str], Any]] = {"str": str, "int": int, "float": float}


def get_xsv_encodings() -> set[str]:
    """Return the XSV column encodings: ``str``, ``int`` and ``float``."""
    return set(_TYPES)


def is_xsv_encoding(encoding: str) -> bool:
    """Return whether ``encoding`` is an XSV column encoding."""
    return isinstance(encoding, str) and encoding in _TYPES


def _check_encoding(encoding: str) -> None:
    if not is_xsv_encoding(encoding):
        raise ValueError(f"Unknown XSV encoding {encoding!r}. Valid encodings: {', '.join(_TYPES)}.")


def xsv_encode(encoding: str, value: Any) -> str:
    """Return the text of ``value`` for a column of the given encoding.

    Raises:
        ValueError: unknown encoding.
        TypeError: ``value`` is not of the encoding's type.
    """
    _check_encoding(encoding)
    expected = _TYPES[encoding]
    if not isinstance(value, expected):
        raise TypeError(
            f"XSV encoding {encoding!r} expects a {expected.__name__}, got {type(value).__name__} {value!r}."
        )
    if encoding == "str":
        return value
    return int.__repr__(value) if encoding == "int" else float.__repr__(value)


def xsv_decode(encoding: str, text: str) -> Any:
    """Parse the text of one field back into the encoding's Python type.

    Raises:
        ValueError: unknown encoding, or text that does not parse as the encoding's type.
    """
    _check_encoding(encoding)
    return _DECODERS[encoding](text)
