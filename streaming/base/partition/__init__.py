"""Upstream import path `streaming.base.partition`."""

from streaming.dataset.partition import get_partitions, get_partitions_orig, get_partitions_relaxed
from streaming.dataset.partition import partition_algos as algos

__all__ = ["algos", "get_partitions", "get_partitions_orig", "get_partitions_relaxed"]
