"""The scheduled job that keeps an MDS dataset up to date with a Delta table, appending or mirroring.

Engine-neutral: ``incremental_to_mds`` here reads a Delta path with delta-rs (`streaming.delta`) and writes in this
process; `streaming.spark.incremental_to_mds` is the same job that also reads with Spark's Delta reader (table
names, Databricks), which `streaming.spark` implements on this package's reader interface
(`streaming.incremental.reader`). A run's walk, top-down: the entry point (`job.py`) checks the run's options
(`options.py`) and hands the run to appending (`append.py`) or mirroring (`mirror.py`), which read what the dataset
holds (`dataset_state.py`), open the reader, read the change (`change.py`), write and commit it (`commit.py`).
"""

from __future__ import annotations

import importlib
from typing import Any

from streaming._extras import check_installed

# Resolved on first use: `import streaming.incremental` alone imports no pyarrow and no deltalake.
_EXPORTS = {
    "IncrementResult": "streaming.incremental.result",
    "IncrementalHistoryError": "streaming.incremental.change",
    "incremental_to_mds": "streaming.incremental.job",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.incremental' has no attribute {name!r}")
    check_installed(("pyarrow",), "delta", f"streaming.incremental.{name}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
