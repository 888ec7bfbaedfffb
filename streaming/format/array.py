"""`Array`: numpy-style indexing (int, negative int, slice, nested lists, ndarrays) over ``get_item``."""

from __future__ import annotations

from typing import Any

import numpy as np


class Array:
    """A read-only sequence; subclasses provide ``size`` and ``get_item(0 <= index < size)``.

    Slices follow Python's rules (``ds[:]`` returns every item; MosaicML Streaming's own slicing drops the
    last one), lists and arrays of indices return (nested) lists of items.
    """

    @property
    def size(self) -> int:
        raise NotImplementedError

    def get_item(self, idx: int) -> Any:
        raise NotImplementedError

    def __getitem__(self, at: Any) -> Any:
        if type(at) is int or isinstance(at, (int, np.integer)) and not isinstance(at, bool):
            size = self.size
            index = int(at)
            if index < 0:
                index += size
            if not 0 <= index < size:
                raise IndexError(f"Sample index {at} is out of range for a dataset of {size} samples.")
            return self.get_item(index)
        if isinstance(at, slice):
            return [self.get_item(index) for index in range(*at.indices(self.size))]
        if isinstance(at, (list, tuple, np.ndarray)):
            return [self[sub] for sub in at]
        raise ValueError(
            f"Unsupported index type {type(at).__name__}: use an int, a slice, a list or an ndarray of ints."
        )
