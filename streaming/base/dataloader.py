"""Upstream path `streaming.base.dataloader`: re-exports."""

from streaming.dataset.dataloader import StreamingDataLoader

__all__ = ["StreamingDataLoader"]
