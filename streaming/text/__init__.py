"""Upstream's text datasets: C4, English Wikipedia and the Pile (tokenizing ones need ``mds-streaming[text]``).

Names load on first use (each needs torch, and some an extra), so importing this package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "StreamingC4": "streaming.text.c4",
    "StreamingEnWiki": "streaming.text.enwiki",
    "StreamingPile": "streaming.text.pile",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.text' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
