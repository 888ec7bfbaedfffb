"""Exceptions with messages that name the column, the sample or the file at fault."""

from __future__ import annotations


class UnknownEncodingError(TypeError, ValueError):
    """An encoding name that no registry knows (a TypeError for upstream's callers, a ValueError by meaning)."""


class EncodingTypeError(TypeError, AttributeError):
    """A value of the wrong type for its encoding (a TypeError, and the AttributeError upstream raised)."""


class UnknownEncodingAssertionError(UnknownEncodingError, AssertionError):
    """An unknown JSON/XSV encoding or a malformed ndarray one (also the AssertionError of upstream's asserts)."""


class MalformedEncodingError(ValueError, AssertionError):
    """An ``ndarray:<dtype>:<shape>`` encoding that does not parse (also the AssertionError of upstream's asserts)."""


class UnstorableTextError(ValueError, AssertionError):
    """Text an XSV shard cannot hold: its separator or newline inside (also upstream's AssertionError)."""


class NonStrEncodingError(UnknownEncodingError, AttributeError):
    """An MDS column encoding that is not a string (also the AttributeError upstream failed with)."""


class EncodingValueError(TypeError, ValueError):
    """A value a number column cannot convert (a TypeError, and the ValueError numpy made upstream raise)."""


class FixedSizeError(ValueError, KeyError):
    """Encoded bytes of the wrong length for a fixed-size column (a ValueError, and upstream's KeyError)."""

    # KeyError would show the message quoted, as a key.
    __str__ = ValueError.__str__


class ScalarShapeError(TypeError, KeyError):
    """A list or array given to a one-number column (a TypeError, and the KeyError upstream raised when the numbers
    did not fill the column's fixed size)."""

    # KeyError would show the message quoted, as a key.
    __str__ = TypeError.__str__


class UnknownDtypeCodeError(ValueError, KeyError):
    """A stored ndarray whose dtype code names no dtype (a ValueError, and the KeyError of upstream's lookup)."""

    # KeyError would show the message quoted, as a key.
    __str__ = ValueError.__str__


class ShardCorruptError(ValueError):
    """A shard file that is truncated, resized or fails its recorded hash."""


def with_context(err: BaseException, context: str) -> BaseException:
    """Return an exception of the same type as ``err`` whose message ends with ``context``.

    The original message comes first, so callers matching upstream's leading words still match.
    """
    message = f"{err.args[0] if len(err.args) == 1 else err} [{context}]"
    try:
        return type(err)(message)
    except Exception:  # noqa: BLE001 - an exception type with an unusual constructor
        return ValueError(message)
