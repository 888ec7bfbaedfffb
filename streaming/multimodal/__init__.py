"""Upstream's multimodal datasets: WebVid (`streaming.multimodal.webvid`).

Names load on first use (they need torch), so importing this package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = ("StreamingInsideWebVid", "StreamingOutsideDTWebVid", "StreamingOutsideGIWebVid")


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'streaming.multimodal' has no attribute {name!r}")
    value = getattr(importlib.import_module("streaming.multimodal.webvid"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(_NAMES)
