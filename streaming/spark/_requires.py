"""Fail early, with the install command, when the optional Spark dependencies are missing."""

from __future__ import annotations

import importlib.util

from streaming.util import get_import_exception_message


def require_pyspark() -> None:
    """Raise ImportError naming the extra to install if pyspark or pyarrow cannot be imported."""
    for module in ("pyspark", "pyarrow"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ImportError(f"{get_import_exception_message('pyspark', 'spark')} ({module} is missing.)", name=module)
