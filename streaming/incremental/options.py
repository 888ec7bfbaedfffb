"""A run's options, checked once and handed down whole: one frozen object instead of keyword pass-throughs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streaming.convert.key_map import MIRROR

#: The job's two modes (`streaming.incremental.append`, `streaming.incremental.mirror`).
MODES = ("append", MIRROR)


@dataclass(frozen=True)
class RunOptions:
    """The arguments of ``incremental_to_mds`` beside the table and the dataset (see its docstring)."""

    version: int | None = None
    columns: Mapping[str, str] | Sequence[str] | None = None
    compression: str | None = "zstd"
    hashes: Sequence[str] = ()
    size_limit: int | str | None = "64mb"
    change_data_feed: bool | None = None
    progress: bool = True
    executor_env: Mapping[str, str] | None = None
    nulls: str = "mask"
    resync: bool = False
    mode: str = "append"
    key: Sequence[str] | None = None

    def check(self) -> None:
        """Refuse options that contradict each other or name no choice, before anything is read."""
        if self.nulls not in ("mask", "error"):
            raise ValueError(f"nulls must be 'mask' or 'error', got {self.nulls!r}.")
        if self.mode not in MODES:
            raise ValueError(f"mode must be 'append' or 'mirror', got {self.mode!r}.")
        if self.mode == "append" and self.key is not None:
            raise ValueError("`key` is for mode='mirror' only (the append-only job identifies rows by their values).")

    def conversion(self) -> dict[str, Any]:
        """The options the conversion of new rows takes (``dataframe_to_mds``'s)."""
        return {
            "compression": self.compression,
            "hashes": self.hashes,
            "size_limit": self.size_limit,
            "progress": self.progress,
        }
