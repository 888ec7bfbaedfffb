"""Upstream's vision datasets: ADE20K, CIFAR-10, COCO and ImageNet.

Names load on first use (each needs torch, and some an extra), so importing this package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "StreamingADE20K": "streaming.vision.ade20k",
    "StreamingCIFAR10": "streaming.vision.cifar10",
    "StreamingCOCO": "streaming.vision.coco",
    "StreamingImageNet": "streaming.vision.imagenet",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.vision' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
