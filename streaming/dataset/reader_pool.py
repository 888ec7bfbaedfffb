"""`ReaderPool`: the shard readers of one or more indexes by global shard id, built when first used, few kept open."""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable
from itertools import accumulate
from typing import Any

import numpy as np

from streaming.format.reader import Reader
from streaming.format.table import ShardTable

OPEN_READERS = 256


class ReaderPool:
    """A sequence of readers over the shards of several tables, numbered table after table.

    Only the ``OPEN_READERS`` most recently used readers are kept (with their file mappings), so memory stays
    flat however many shards there are.

    Args:
        locations: ``(local, split)`` of each table.
        tables: the shard tables, in the same order.
    """

    def __init__(self, locations: list[tuple[str, str]], tables: list[ShardTable]) -> None:
        self._locations = locations
        self._tables = tables
        self._offsets = [0, *accumulate(len(table) for table in tables)]
        self._open: OrderedDict[int, Reader] = OrderedDict()
        self._lock = threading.Lock()
        self._allow_unsafe_types = False
        #: Whether a reader decompresses its shard when opened (`Reader.decompresses_on_open`); the shard cache
        #: turns it off when it prepares the shards itself.
        self.decompress_on_open = True

    def __len__(self) -> int:
        return self._offsets[-1]

    def locate(self, shard_id: int) -> tuple[int, int]:
        """``(table number, shard number within that table)`` of a global shard id."""
        table_id = bisect_right(self._offsets, shard_id) - 1
        return table_id, shard_id - self._offsets[table_id]

    def __getitem__(self, shard_id: int) -> Reader:
        reader = self._open.get(shard_id)
        if reader is not None:
            return reader
        if not 0 <= shard_id < len(self):
            raise IndexError(f"Shard {shard_id} is out of range for {len(self)} shards.")
        with self._lock:
            table_id, local_id = self.locate(shard_id)
            local, split = self._locations[table_id]
            reader = self._tables[table_id].reader(local, split, local_id)
            reader.validate(self._allow_unsafe_types)
            reader.decompresses_on_open = self.decompress_on_open
            self._open[shard_id] = reader
            if len(self._open) > OPEN_READERS:
                self._open.popitem(last=False)
        return reader

    def release_pages(self, shard_ids: Iterable[int]) -> None:
        """Have the open readers among ``shard_ids`` unmap the pages read so far (`Reader.release_pages`)."""
        for shard_id in shard_ids:
            reader = self._open.get(shard_id)
            if reader is not None:
                reader.release_pages()

    def validate(self, allow_unsafe_types: bool) -> None:
        """Have each format refuse what the caller did not allow (`Reader.validate`), once per distinct shard setting.

        Shards of one index share a few settings (columns, encodings, compression), so one reader per setting
        stands for all of them; building it opens no file. The choice holds for every reader built afterwards.
        """
        self._allow_unsafe_types = allow_unsafe_types
        for table_id, table in enumerate(self._tables):
            local, split = self._locations[table_id]
            _, first_of_each = np.unique(table.config_ids, return_index=True)
            for shard_id in first_of_each.tolist():
                table.reader(local, split, shard_id).validate(allow_unsafe_types)

    def forget(self, shard_id: int) -> None:
        """Drop a reader (after its files were evicted) so that its file mapping is released."""
        with self._lock:
            self._open.pop(shard_id, None)

    def __getstate__(self) -> dict[str, Any]:
        # Everything but this process's open readers and lock, so a setting added later reaches spawned workers
        # too (a hand-kept list once left `decompress_on_open` behind).
        return {name: value for name, value in self.__dict__.items() if name not in ("_open", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open = OrderedDict()
        self._lock = threading.Lock()
