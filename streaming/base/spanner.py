"""Upstream path `streaming.base.spanner`: re-exports."""

from streaming.compat.spanner import Spanner

__all__ = ["Spanner"]
