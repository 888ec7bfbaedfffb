"""Registries of named classes and functions (upstream's `registry_utils`), on the `catalogue` library.

`streams_registry` names the stream classes that ``StreamingDataset(stream_name=...)`` can build. Classes register
in code (``streams_registry.register("mine", func=MyStream)``) or through the entry-point group
``streaming_streams_registry`` of an installed package, as with MosaicML Streaming.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar, cast

import catalogue

__all__ = [
    "TypedRegistry",
    "construct_from_registry",
    "create_registry",
    "import_file",
    "save_registry",
    "streams_registry",
]

T = TypeVar("T")
S = TypeVar("S")
TypeBoundT = TypeVar("TypeBoundT", bound=type)
CallableBoundT = TypeVar("CallableBoundT", bound=Callable[..., Any])


class TypedRegistry(catalogue.Registry, Generic[T]):
    """A `catalogue` registry whose items have one type, with a description.

    Args:
        namespace: the registry's path, e.g. ``("streaming", "streams_registry")``.
        entry_points: also look names up in the entry-point group ``"_".join(namespace)``.
        description: what the registry holds.
    """

    def __init__(self, namespace: Sequence[str], entry_points: bool = False, description: str = "") -> None:
        super().__init__(namespace, entry_points=entry_points)
        self.description = description

    def __call__(self, name: str, func: T | None = None) -> Callable[[T], T]:
        return super().__call__(name, func)

    def register(self, name: str, *, func: T | None = None) -> T:
        """Register ``func`` under ``name``; without ``func``, return a decorator."""
        return cast(T, super().register(name, func=func))

    def register_class(self, name: str, *, func: TypeBoundT | None = None) -> TypeBoundT:
        """Register the class ``func`` under ``name``; without ``func``, return a decorator."""
        return cast(TypeBoundT, super().register(name, func=func))

    def get(self, name: str) -> T:
        """Return what is registered under ``name`` (``catalogue.RegistryError`` lists the known names)."""
        return super().get(name)

    def get_all(self) -> dict[str, T]:
        return super().get_all()

    def get_entry_point(self, name: str, default: T | None = None) -> T:
        return super().get_entry_point(name, default=default)

    def get_entry_points(self) -> dict[str, T]:
        return super().get_entry_points()


def create_registry(
    *namespace: str, generic_type: type[S], entry_points: bool = False, description: str = ""
) -> TypedRegistry[S]:
    """Create a registry at a namespace no other registry uses.

    Raises:
        catalogue.RegistryError: the namespace exists already.
    """
    if catalogue.check_exists(*namespace):
        raise catalogue.RegistryError(f"Namespace already exists: {namespace}")
    # The entry type is a runtime argument, which mypy cannot take as a type parameter.
    return TypedRegistry[generic_type](namespace, entry_points=entry_points, description=description)  # type: ignore[valid-type]


def construct_from_registry(
    name: str,
    registry: TypedRegistry,
    partial_function: bool = True,
    pre_validation_function: Callable[[Any], None] | type | None = None,
    post_validation_function: Callable[[Any], None] | None = None,
    kwargs: dict[str, Any] | None = None,
) -> Any:
    """Build the item registered as ``name``: a class is instantiated with ``kwargs``; a function is bound to them
    with ``functools.partial`` (or called, when ``partial_function=False``).

    Args:
        pre_validation_function: a type the registered item must subclass, or a function that raises on a bad one.
        post_validation_function: a function that raises on a bad built item.

    Raises:
        ValueError: a failed type check, or an item that is neither a class nor callable.
    """
    kwargs = kwargs or {}
    constructor = registry.get(name)
    if isinstance(pre_validation_function, type):
        if not (isinstance(constructor, type) and issubclass(constructor, pre_validation_function)):
            raise ValueError(f"Expected {name} to be of type {pre_validation_function}, but got {constructor!r}")
    elif callable(pre_validation_function):
        pre_validation_function(constructor)
    elif pre_validation_function is not None:
        raise ValueError(
            f"Expected pre_validation_function to be a callable or a type, but got {type(pre_validation_function)}"
        )
    if isinstance(constructor, type) or (callable(constructor) and not partial_function):
        built = constructor(**kwargs)
    elif callable(constructor):
        built = functools.partial(constructor, **kwargs)
    else:
        raise ValueError(f"Expected {name} to be a class or function, but got {type(constructor)}")
    if post_validation_function is not None:
        post_validation_function(built)
    return built


def import_file(loc: str | Path) -> ModuleType:
    """Run the Python file at ``loc`` as a module and return it (e.g. to register items it defines).

    Raises:
        FileNotFoundError: no file at ``loc``.
        RuntimeError: the file raised while running (the error is chained).
    """
    if not os.path.exists(loc):
        raise FileNotFoundError(f"File {loc} does not exist.")
    spec = importlib.util.spec_from_file_location("python_code", str(loc))
    if spec is None or spec.loader is None:
        raise RuntimeError(f"Error executing {loc}: it cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise RuntimeError(f"Error executing {loc}") from err
    return module


@contextmanager
def save_registry() -> Iterator[None]:
    """Restore every registry to its current contents when the block exits."""
    saved = copy.deepcopy(catalogue.REGISTRY)
    try:
        yield
    finally:
        catalogue.REGISTRY = saved


def _stream_class() -> Any:
    from streaming.dataset.stream import Stream

    return Stream


streams_registry: TypedRegistry[type] = create_registry(
    "streaming",
    "streams_registry",
    generic_type=type,
    entry_points=True,
    description="The Stream classes that StreamingDataset(stream_name=...) builds.",
)
streams_registry.register("stream", func=_stream_class())


def _delta_stream(**kwargs: Any) -> Any:
    """A `streaming.dataset.delta_stream.DeltaStream` (imported when first built: it needs pyarrow)."""
    from streaming.dataset.delta_stream import DeltaStream

    return DeltaStream(**kwargs)


# ``StreamingDataset(remote=<table>, stream_name="delta", stream_config={"version": n})`` pins a table version.
streams_registry.register("delta", func=cast(type, _delta_stream))


def _parquet_stream(**kwargs: Any) -> Any:
    """A `streaming.dataset.parquet_stream.ParquetStream` (imported when first built: it needs pyarrow)."""
    from streaming.dataset.parquet_stream import ParquetStream

    return ParquetStream(**kwargs)


# ``StreamingDataset(remote=<folder>, stream_name="parquet")`` reads a folder of Parquet files.
streams_registry.register("parquet", func=cast(type, _parquet_stream))
