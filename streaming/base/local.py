"""Upstream path `streaming.base.local`: re-exports."""

from streaming.dataset.local import LocalDataset

__all__ = ["LocalDataset"]
