"""A batch of samples held column by column: what batch reads return instead of one dict per sample.

``Columns`` maps each column name (in the samples' key order) to either

* a numpy array stacking the column's values along a new first axis, when every value is a number or an array
  of one dtype and shape (the values ``torch``'s ``default_collate`` would stack into one tensor of that
  dtype: `streaming.dataset.handover` hands these over as they are), or
* a list of the values as a per-sample read gives them (strings, bytes, JSON values, ``None`` of a NULL,
  arrays of differing shapes, ...).

Either way ``columns[name][i]`` is sample ``i``'s value (a numpy scalar or a row for an array).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: One column of a batch: stacked values, or the per-sample values.
Column = np.ndarray | list[Any]
Columns = dict[str, Column]


def columns_of(samples: Sequence[dict[str, Any]]) -> Columns:
    """The columns of per-sample dicts, as lists (the keys of the first sample, as ``default_collate`` takes).

    Raises:
        KeyError: a sample lacks a key of the first one (as ``default_collate`` of the dicts would).
    """
    if not samples:
        return {}
    return {key: [sample[key] for sample in samples] for key in samples[0]}


def batch_size_of(columns: Columns) -> int:
    """The number of samples in ``columns`` (0 for no columns)."""
    for column in columns.values():
        return len(column)
    return 0
