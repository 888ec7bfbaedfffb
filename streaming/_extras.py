"""Import an optional dependency on first use, or fail naming the extra that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType


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
            f'Install it with: pip install "mds-streaming[{extra}]"'
        ) from err
