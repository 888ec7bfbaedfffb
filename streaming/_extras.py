"""Optional dependencies: import one on first use, or fail with the command that installs the extra providing it.

The one owner of that install hint: the storage backends, the Spark converter and the dataset zoo all use it.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType

#: The extra that installs each optional package a public name or command imports when first used.
EXTRA_OF_PACKAGE = {"torch": "torch", "pyarrow": "cli", "matplotlib": "cli", "pyspark": "spark", "pandas": "spark"}


def install_hint(extra: str) -> str:
    """The sentence telling how to install an ``mds-streaming`` extra."""
    return f'Install it with: pip install "mds-streaming[{extra}]"'


def explain_missing(err: ModuleNotFoundError, needed_for: str) -> ModuleNotFoundError | None:
    """The error to raise instead of ``err`` when it is an optional package missing, naming the extra; else None."""
    package = (err.name or "").split(".")[0]
    extra = EXTRA_OF_PACKAGE.get(package)
    if extra is None:
        return None
    return ModuleNotFoundError(
        f"{needed_for} needs {package!r}, which is not installed. {install_hint(extra)}", name=package
    )


def require(module: str, extra: str, needed_for: str) -> ModuleType:
    """Return the imported ``module``.

    Raises:
        ImportError: it is not installed; the message names ``pip install "mds-streaming[<extra>]"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{needed_for} needs {module.split('.')[0]!r}, which is not installed or failed to import ({err}). "
            f"{install_hint(extra)}"
        ) from err


def check_installed(modules: Sequence[str], extra: str, needed_for: str) -> None:
    """Raise ImportError naming the extra to install if any of ``modules`` is missing (found without importing)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ImportError(
                f"{needed_for} needs {module!r}, which is not installed. {install_hint(extra)}", name=module
            )
