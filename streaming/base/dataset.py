"""Upstream path `streaming.base.dataset`: re-exports."""

from streaming.dataset.dataset import StreamingDataset

__all__ = ["StreamingDataset"]
