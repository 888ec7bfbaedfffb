"""Upstream path `streaming.base.util`: re-exports of the small utilities, loaded on first use."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "bytes_to_int": "streaming.util",
    "number_abbrev_to_int": "streaming.util",
    "get_list_arg": "streaming.util",
    "wait_for_file_to_exist": "streaming.util",
    "get_import_exception_message": "streaming.util",
    "retry": "streaming.storage.retry",
    "TCallable": "streaming.storage.retry",
    "merge_index": "streaming.format.merge",
    "clean_stale_shared_memory": "streaming.compat.shm_cleanup",
}

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming.base.util' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
