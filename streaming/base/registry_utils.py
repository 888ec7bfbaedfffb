"""Upstream path `streaming.base.registry_utils`: re-exports."""

from streaming.dataset.registry import TypedRegistry, construct_from_registry

__all__ = ["TypedRegistry", "construct_from_registry"]
