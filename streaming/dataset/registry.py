"""`streams_registry`: stream classes by name, so ``StreamingDataset(stream_name=...)`` can build custom streams.

Classes register in code (``streams_registry.register("mine", func=MyStream)``) or through the entry-point
group ``streaming_streams_registry`` of an installed package, as with MosaicML Streaming.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "streaming_streams_registry"


class TypedRegistry:
    """A name → callable registry that also looks names up in one entry-point group."""

    def __init__(self, namespace: tuple[str, ...], entry_point_group: str | None = None) -> None:
        self.namespace = namespace
        self.entry_point_group = entry_point_group
        self._items: dict[str, Callable[..., Any]] = {}

    def register(self, name: str, func: Callable[..., Any] | None = None) -> Any:
        """Register ``func`` under ``name``; without ``func``, return a decorator."""
        if func is None:

            def decorate(target: Callable[..., Any]) -> Callable[..., Any]:
                self._items[name] = target
                return target

            return decorate
        self._items[name] = func
        return func

    def _load_entry_point(self, name: str) -> Callable[..., Any] | None:
        if self.entry_point_group is None:
            return None
        for point in entry_points(group=self.entry_point_group):
            if point.name == name:
                self._items[name] = point.load()
                return self._items[name]
        return None

    def get(self, name: str) -> Callable[..., Any]:
        """Return what is registered under ``name``; raise KeyError listing the known names."""
        found = self._items.get(name) or self._load_entry_point(name)
        if found is None:
            raise KeyError(
                f"{name!r} is not registered in {'.'.join(self.namespace)}; registered: {sorted(self.get_all())}."
            )
        return found

    def get_all(self) -> dict[str, Callable[..., Any]]:
        if self.entry_point_group is not None:
            for point in entry_points(group=self.entry_point_group):
                self._items.setdefault(point.name, point)
        return {name: (item.load() if hasattr(item, "load") else item) for name, item in self._items.items()}

    def __contains__(self, name: str) -> bool:
        return name in self._items or self._load_entry_point(name) is not None


def _stream_class() -> Any:
    from streaming.dataset.stream import Stream

    return Stream


streams_registry = TypedRegistry(("streaming", "streams_registry"), ENTRY_POINT_GROUP)
streams_registry.register("stream", func=_stream_class())


def construct_from_registry(
    name: str,
    registry: TypedRegistry,
    partial_function: bool = False,
    pre_validation_function: Any = None,
    post_validation_function: Any = None,
    kwargs: dict[str, Any] | None = None,
) -> Any:
    """Build the registered object ``name`` with ``kwargs`` (upstream's helper of the same name)."""
    constructor = registry.get(name)
    if pre_validation_function is not None:
        pre_validation_function(constructor)
    if partial_function:
        import functools

        return functools.partial(constructor, **(kwargs or {}))
    built = constructor(**(kwargs or {}))
    if post_validation_function is not None:
        post_validation_function(built)
    return built
