"""`WorkerShare`: one worker's samples of an epoch, located in their shards a bounded chunk at a time.

The node's epoch plan is a file of global sample ids (`StreamingDataset` maps it); a worker's share is one
contiguous run of it, -1 where a worker round is padded. Reading it whole and locating every sample at once
cost ~40 bytes per sample of the share in every DataLoader worker, and seconds before its first sample at
10M samples; `WorkerShare` reads ``CHUNK_SAMPLES`` ids at a time, as the reader gets to them, so a worker
holds a few MiB of its share whatever the epoch's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

#: Plan entries read and located at once: 1 MiB of ids, large enough that numpy's per-call costs vanish.
CHUNK_SAMPLES = 1 << 17


class PlanRun(Protocol):
    """A worker's run of the plan, read forward in slices: a (mapped) array, or a `StreamedShare`."""

    def __len__(self) -> int: ...

    def __getitem__(self, at: slice, /) -> Any: ...


#: ``(shard ids, indices within the shards)`` of consecutive samples.
Located = tuple[NDArray[np.int64], NDArray[np.int64]]


class WorkerShare:
    """This worker's samples in epoch order, handed out as ``(shard ids, indices within them)`` arrays.

    Args:
        sample_ids: the worker's run of the plan (a memory map is read only as `take` reaches it); entries
            below 0 are padding and are skipped.
        shard_starts: the global id of every shard's first sample, ascending.
    """

    def __init__(self, sample_ids: PlanRun, shard_starts: NDArray[np.int64]) -> None:
        self._ids = sample_ids
        self._starts = shard_starts
        self._read_to = 0  # plan entries read so far
        self._pending: Located = (np.zeros(0, np.int64), np.zeros(0, np.int64))

    def take(self, count: int) -> Located:
        """The next ``count`` samples (fewer at the end of the share, none after it)."""
        shards, indices = self._pending
        if len(shards) < count:
            more = [self._pending]
            have = len(shards)
            while have < count and self._read_to < len(self._ids):
                located = self._locate_next()
                more.append(located)
                have += len(located[0])
            shards = np.concatenate([part[0] for part in more])
            indices = np.concatenate([part[1] for part in more])
        self._pending = (shards[count:], indices[count:])
        return shards[:count], indices[:count]

    def has_more(self) -> bool:
        """Whether any sample is left (padding alone at the end of the share is none)."""
        while not len(self._pending[0]) and self._read_to < len(self._ids):
            self._pending = self._locate_next()
        return len(self._pending[0]) > 0

    def chunks(self, count: int = CHUNK_SAMPLES) -> Iterator[Located]:
        """The rest of the share, ``count`` samples at a time (the last chunk may be smaller)."""
        while True:
            shards, indices = self.take(count)
            if not len(shards):
                return
            yield shards, indices

    def _locate_next(self) -> Located:
        raw = np.asarray(self._ids[self._read_to : self._read_to + CHUNK_SAMPLES], np.int64)
        self._read_to += len(raw)
        ids = raw[raw >= 0]
        shards = np.searchsorted(self._starts, ids, "right") - 1
        return shards, ids - self._starts[shards]


def first_needs(sample_ids: PlanRun, shard_starts: NDArray[np.int64]) -> list[tuple[int, int]]:
    """``(position, shard)`` of every shard of a share where the share first needs it, in that order (positions
    count the share's samples, padding left out); read in chunks, so memory follows the shards, not the share."""
    share = WorkerShare(sample_ids, shard_starts)
    seen = np.zeros(len(shard_starts), bool)
    found: list[tuple[int, int]] = []
    position = 0
    for shards, _ in share.chunks():
        unique, first = np.unique(shards, return_index=True)
        new = ~seen[unique]
        seen[unique] = True
        found.extend(zip((first[new] + position).tolist(), unique[new].tolist()))
        position += len(shards)
    found.sort()
    return found
