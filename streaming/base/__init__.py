"""Upstream's import path `streaming.base`: re-exports only; the code lives in the concern folders.

Names resolve lazily so that `import streaming.base.util` (say, on a Spark executor) does not pull in torch.
"""

from __future__ import annotations

from typing import Any

import streaming

__all__ = [
    "StreamingDataLoader",
    "Stream",
    "StreamingDataset",
    "CSVWriter",
    "JSONWriter",
    "LocalDataset",
    "MDSWriter",
    "TSVWriter",
    "XSVWriter",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(streaming, name)
    raise AttributeError(f"module 'streaming.base' has no attribute {name!r}")
