"""`Spanner`: map a global sample index to (shard, index within the shard)."""

from __future__ import annotations

from array import array
from bisect import bisect_right

import numpy as np
from numpy.typing import ArrayLike


class Spanner:
    """Locate samples across shards of the given sizes.

    Args:
        shard_sizes: samples per shard.
        span_size: kept for upstream compatibility; lookups bisect a compact offsets array instead.
    """

    def __init__(self, shard_sizes: ArrayLike, span_size: int = 1 << 10) -> None:
        sizes = np.asarray(shard_sizes, np.int64)
        self.shard_sizes = sizes
        self.span_size = span_size
        self.num_samples = int(sizes.sum())
        self._starts = array("q", (np.cumsum(sizes) - sizes).tolist())

    def __getitem__(self, index: int) -> tuple[int, int]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"Invalid sample index `{index}`: 0 <= {index} < {self.num_samples}")
        shard = bisect_right(self._starts, index) - 1
        return shard, index - self._starts[shard]
