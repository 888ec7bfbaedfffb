"""Upstream import path `streaming.base.partition.relaxed`."""

from streaming.dataset.partition import get_partitions_relaxed

__all__ = ["get_partitions_relaxed"]
