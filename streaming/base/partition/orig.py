"""Upstream import path `streaming.base.partition.orig`."""

from streaming.dataset.partition import get_partitions_orig

__all__ = ["get_partitions_orig"]
