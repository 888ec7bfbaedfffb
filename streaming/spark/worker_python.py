"""Spark's Python workers that cannot import what a conversion runs on them: one sentence saying why and what to do.

The workers are their own interpreters (``PYSPARK_PYTHON``, or the ``python3`` on their PATH), so a package
installed in the driver's Python alone reaches them as a ``ModuleNotFoundError`` deep inside a Java stack trace.
"""

from __future__ import annotations

import os
import re
import sys

_MISSING = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


class WorkerImportError(RuntimeError):
    """Spark's Python workers lack a module the conversion's tasks import."""


def worker_import_problem(error: BaseException) -> WorkerImportError | None:
    """The error to raise instead of ``error`` when it is a worker's failed import; else None."""
    found = _MISSING.search(str(error))
    if found is None:
        return None
    workers = os.environ.get("PYSPARK_PYTHON")
    which = f"PYSPARK_PYTHON={workers}" if workers else "the python3 on their PATH"
    return WorkerImportError(
        f"Spark's Python workers cannot import {found.group(1)!r}, which dataframe_to_mds's tasks need: they run "
        f"{which}, not this Python ({sys.executable}); install mds-streaming with its spark extra there (from the "
        f"checkout or wheel this Python has it from; on Databricks, the notebook's %pip install reaches the workers "
        f"too) or start Spark with "
        f"PYSPARK_PYTHON={sys.executable}."
    )
