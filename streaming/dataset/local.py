"""`LocalDataset`: a map-style dataset over shards that are already on local disk."""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

from streaming.dataset.array import Array
from streaming.dataset.reader_pool import ReaderPool
from streaming.format.index import get_index_basename
from streaming.format.table import ShardTable
from streaming.storage.registry import did_you_mean
from streaming.storage.url import split_url

if TYPE_CHECKING:
    from streaming.format.reader import Reader


class LocalDataset(Array):
    """Random access and fast sequential iteration over ``<local>/<split>/index.json`` and its shards.

    Compressed shards are decompressed next to their compressed copy the first time they are read.
    Works as a map-style dataset in a ``torch.utils.data.DataLoader`` (no torch import needed here).

    Args:
        local: dataset directory.
        split: optional sub-directory.
        allow_unsafe_types: decode columns whose encoding runs code from the shard (``pkl``); without it such
            a dataset is refused here, before any sample is read.
    """

    def __init__(self, local: str, split: str | None = None, allow_unsafe_types: bool = False) -> None:
        if split_url(local).scheme not in ("", "file"):
            # A URL given where a folder is expected would otherwise end in a bare "No such file or directory".
            raise FileNotFoundError(
                f"LocalDataset reads a folder on this machine, and {local!r} is a URL{did_you_mean(local)}: stream it "
                f"with StreamingDataset(remote={local!r}), or copy it here first (mds-streaming cp {local} <folder>)."
            )
        self.local = local
        self.split = split or ""
        self.allow_unsafe_types = allow_unsafe_types
        table = ShardTable.from_file(os.path.join(local, self.split, get_index_basename()), root=local)
        self.readers = ReaderPool([(local, self.split)], [table])
        self.readers.validate(allow_unsafe_types)
        self.samples_per_shard = table.samples
        self.num_samples = int(table.samples.sum())
        self._shard_starts = array("q", (table.samples.cumsum() - table.samples).tolist())
        self._last: tuple[int, int, Reader | None] = (0, 0, None)

    def __len__(self) -> int:
        return self.num_samples

    @property
    def shards(self) -> ReaderPool:
        """Upstream's ``shards``: the reader of every shard (built when first used)."""
        return self.readers

    @property
    def size(self) -> int:
        return self.num_samples

    def get_item(self, sample_id: int) -> dict[str, Any]:
        """Read one sample; consecutive reads from one shard skip the shard lookup."""
        start, end, reader = self._last
        if reader is None or not start <= sample_id < end:
            shard_id = bisect_right(self._shard_starts, sample_id) - 1
            start = self._shard_starts[shard_id]
            reader = self.readers[shard_id]
            self._last = (start, start + reader.samples, reader)
        return reader.get_item(sample_id - start)

    def __getitem__(self, at: Any) -> Any:
        if type(at) is int and 0 <= at < self.num_samples:
            return self.get_item(at)
        return super().__getitem__(at)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_last": (0, 0, None)}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return chain.from_iterable(map(iter, map(self.readers.__getitem__, range(len(self.readers)))))
