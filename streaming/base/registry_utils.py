"""Upstream path `streaming.base.registry_utils`: re-exports."""

from streaming.dataset.registry import (
    CallableBoundT,
    S,
    T,
    TypeBoundT,
    TypedRegistry,
    construct_from_registry,
    create_registry,
    import_file,
    save_registry,
)

__all__ = [
    "CallableBoundT",
    "S",
    "T",
    "TypeBoundT",
    "TypedRegistry",
    "construct_from_registry",
    "create_registry",
    "import_file",
    "save_registry",
]
