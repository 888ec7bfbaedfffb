"""`Array` for the datasets: the shards' own base class (it lives with the formats, whose readers derive from it)."""

from streaming.format.array import Array

__all__ = ["Array"]
