"""Whether a table argument names a Delta table by its path (any URL) or is a table name, which only Spark reads."""

from __future__ import annotations

import os

from streaming.storage.url import is_remote


def looks_like_path(text: str) -> bool:
    """Paths and URLs are read as Delta tables; anything else is a table name."""
    return is_remote(text) or text.startswith(("/", ".", "~", "file:")) or os.sep in text or os.path.exists(text)
