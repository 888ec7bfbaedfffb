"""`distinct`: the sorted distinct values of an array, without importing numpy.ma.

numpy 2's ``np.unique`` checks its input for masked arrays, which imports ``numpy.ma`` on the first call: 0.1 s,
paid by every DataLoader worker before its first shuffled batch and by every process before its first eviction.
Asked for the first indices as well, ``np.unique`` skips that check.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def distinct(values: ArrayLike) -> NDArray:
    """``np.unique(values)``: the distinct values, sorted."""
    return np.unique(values, return_index=True)[0]
