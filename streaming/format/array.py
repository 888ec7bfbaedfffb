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
                raise IndexError(
                    f"Invalid sample index `{at}`: 0 <= {at} < {size} (out of range; negative indices count from "
                    f"the end)."
                )
            return self.get_item(index)
        if isinstance(at, slice):
            return [self.get_item(index) for index in range(*at.indices(self.size))]
        if isinstance(at, (list, tuple, np.ndarray)):
            return [self[sub] for sub in at]
        raise ValueError(
            f"Unsupported argument type passed to __getitem__: {type(at)}. Use an int, a slice, a list or an "
            f"ndarray of ints."
        )
