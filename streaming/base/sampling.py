"""Upstream import path `streaming.base.sampling`."""

from streaming.dataset.sampling import get_sampling

__all__ = ["get_sampling"]
