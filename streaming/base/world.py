"""Upstream import path `streaming.base.world`."""

from streaming.dataset.world import World

__all__ = ["World"]
