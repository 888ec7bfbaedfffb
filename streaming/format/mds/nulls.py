"""NULL masks: how an MDS dataset stores NULLs of a column whose encoding has no NULL, and how they read back.

MDS has no NULL. A column ``c`` whose values may be NULL is written as two plain columns: ``c`` with the
encoding's zero value (``0``, ``""``, ``b""``, an empty array, ...) where the value is NULL, and
``c__is_null`` (``uint8``: 1 for NULL, 0 otherwise). Any MDS reader, MosaicML Streaming included, sees
those two columns; ours recognises the pair by its naming alone (nothing is added to ``index.json``) and
folds it back: ``c`` reads as ``None`` where the mask is 1, and the mask column is not part of the sample.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

MASK_SUFFIX = "__is_null"
MASK_ENCODING = "uint8"

Sample = dict[str, Any]


def mask_name(column: str) -> str:
    """The name of the mask column that marks the NULLs of ``column``."""
    return column + MASK_SUFFIX


def masked_columns(names: Sequence[str], encodings: Sequence[str]) -> dict[str, str]:
    """``{value column: mask column}`` for every NULL-mask pair among a shard's columns."""
    encoding_of = dict(zip(names, encodings))
    pairs = {}
    for name, encoding in encoding_of.items():
        if encoding == MASK_ENCODING and name.endswith(MASK_SUFFIX):
            value = name[: -len(MASK_SUFFIX)]
            if value in encoding_of:
                pairs[value] = name
    return pairs


def fold_nulls(decode: Callable[..., Sample], pairs: dict[str, str]) -> Callable[..., Sample]:
    """Wrap a sample decoder so that each masked value reads as ``None`` and the mask columns disappear."""
    items = tuple(pairs.items())

    def decode_with_nulls(*args: Any) -> Sample:
        sample = decode(*args)
        for value, mask in items:
            if sample.pop(mask):
                sample[value] = None
        return sample

    return decode_with_nulls
