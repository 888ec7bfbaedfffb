"""Upstream path `streaming.base.spanner`: re-exports."""

from streaming.dataset.spanner import Spanner

__all__ = ["Spanner"]
