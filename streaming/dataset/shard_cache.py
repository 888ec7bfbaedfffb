"""`ShardCache`: a dataset's shards on local disk: which are there, the bytes they take, preparing and evicting them.

The one owner of preparing a shard. `ShardCache.prepare` takes the shard's lock, makes room under
``cache_limit`` (evicting the coldest shards), has the stream's `ShardFetcher` download, verify and decompress
its files, and keeps the accounting; `ShardCache.prefetch` schedules preparations ahead of a reader
(`streaming.dataset.prefetch`). A `Stream` subclass that overrides upstream's ``prepare_shard`` hook is
called in the fetcher's place.

Every process of a node that uses the same local directories shares the accounting (`CacheState`) and the
per-shard locks (`ShardLocks`); a process only remembers for itself which shards it has already seen present
(its ready flags), so nothing here needs a barrier. Under ``cache_limit`` every shard goes through
:meth:`ShardCache.prepare`, which makes room by evicting the least recently used shards that can be fetched
again; without a limit, a shard whose files are on disk costs one ``stat`` per file per process.

The disk is the truth: a shard whose files disappeared (someone cleaned the directory) is fetched again when
next needed, and its accounting is dropped whole, so a cleaned cache never looks full.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streaming.dataset.coordination import CacheState, ShardLocks
from streaming.dataset.prefetch import Prefetcher
from streaming.dataset.reader_pool import ReaderPool
from streaming.dataset.shard_fetcher import ShardFetcher
from streaming.dataset.stream import Stream
from streaming.format.reader import Reader
from streaming.format.table import ShardTable

PREPARE_THREADS = 4
#: Beyond ``predownload``, iteration keeps one shard per prepare thread downloading, and at most this many shards
#: per thread prepared and not yet read (the disk it may take ahead of the reader); not under a cache limit.
PREPARED_AHEAD_PER_THREAD = 2
_CACHE_RETRY_SECONDS = 0.02
_FETCHING_PREPARE = Stream.prepare_shard


def _new_opening_lock() -> None:
    global _opening
    _opening = threading.Lock()


#: Serialises this process's first opening of node-wide state (made anew in a forked child, as a thread of the
#: parent may have held it at the fork).
_opening = threading.Lock()
os.register_at_fork(after_in_child=_new_opening_lock)


class ShardCache:
    """The local copies of the shards of a dataset's streams.

    Args:
        streams: the dataset's streams, in shard order.
        tables: each stream's shard table.
        readers: the readers of all shards, by global shard id.
        cache_limit: most bytes the local directories may hold (index files included), or ``None``.
    """

    def __init__(
        self, streams: list[Stream], tables: list[ShardTable], readers: ReaderPool, cache_limit: int | None
    ) -> None:
        self.streams = streams
        self.tables = tables
        self.readers = readers
        self.limit = cache_limit
        shards_per_stream = [len(table) for table in tables]
        self.num_shards = sum(shards_per_stream)
        self.largest_shard = int(max((t.raw_bytes + t.zip_bytes).max(initial=0) for t in tables))
        # Only shards that can be fetched again may be deleted: for a stream without a remote, local is the data.
        self.evictable = np.repeat([s.has_remote for s in streams], shards_per_stream).astype(bool)
        self._shard_offsets = np.concatenate([[0], np.cumsum(shards_per_stream)[:-1]]).astype(np.int64)
        # When shards are prepared here (under their locks, within the limit), a reader that opens a shard another
        # process is still preparing must fail and have the read prepare it (waiting for that process), not
        # decompress a second copy the limit does not count. A local dataset's readers decompress on open.
        readers.decompress_on_open = not self.prefetches
        self.fetchers = [ShardFetcher(stream) for stream in streams]
        # Upstream's hook: a stream subclass with its own `prepare_shard` fetches its shards itself.
        self._own_prepare = [type(stream).prepare_shard is not _FETCHING_PREPARE for stream in streams]
        self._locks: list[ShardLocks] | None = None
        self._accounting: CacheState | None = None
        self._ready: bytearray | None = None
        # Reads of this process, kept even while no accounting is open, so the first eviction without a limit
        # still picks the least recently used shard.
        self._last_read = np.zeros(self.num_shards, np.int64)
        if cache_limit is not None:
            self._check_limit(cache_limit)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle for DataLoader workers: locks, the mapped accounting and this process's flags stay behind."""
        return {
            **self.__dict__,
            "_locks": None,
            "_accounting": None,
            "_ready": None,
            "_last_read": np.zeros(self.num_shards, np.int64),
        }

    # ------------------------------------------------------------------ settings and sizes

    def _check_limit(self, limit: int) -> None:
        index_bytes = sum(stream.get_index_size() for stream in self.streams)
        if limit <= index_bytes:
            raise ValueError(
                f"Minimum cache usage ({index_bytes} bytes) is larger than the cache limit ({limit} bytes). Please "
                f"raise `cache_limit`: it must be larger than the index files ({index_bytes} bytes)."
            )
        largest = self.largest_shard
        if limit < 4 * largest:
            raise ValueError(
                f"Cache limit ({limit} bytes) is too low. Increase the `cache_limit` to at-least four times the "
                f"largest shard size ({largest} bytes, raw + compressed), i.e. {4 * largest} bytes."
            )
        # Shards of streams without a remote stay for good, like the index files: downloads need room above them.
        local_only = sum(
            int((table.raw_bytes + table.zip_bytes).sum())
            for stream, table in zip(self.streams, self.tables)
            if not stream.has_remote
        )
        if local_only and limit < index_bytes + local_only + 4 * largest:
            raise ValueError(
                f"Cache limit ({limit} bytes) is too low. The index files ({index_bytes} bytes) and the shards of "
                f"streams with no remote ({local_only} bytes) are never evicted, so the limit must be at least "
                f"{index_bytes + local_only + 4 * largest} bytes (four times the largest shard above them)."
            )

    @property
    def usage(self) -> int:
        """Bytes the local directories hold for this dataset (only accounted under a cache limit, else 0)."""
        return self._cache_state().usage() if self.limit is not None else 0

    @property
    def prefetches(self) -> bool:
        """Whether iteration must prepare shards ahead (some have a remote, or the disk budget is managed)."""
        return bool(self.evictable.any()) or self.limit is not None

    def prepare_threads(self) -> int:
        """Threads preparing shards ahead of the reader: fewer under a tight limit, so they cannot starve it."""
        if self.limit is None:
            return PREPARE_THREADS
        return max(1, min(PREPARE_THREADS, self.limit // max(self.largest_shard, 1) // 2))

    def shards_ahead(self, readers: int) -> int:
        """How many shards each of ``readers`` readers on this node may hold prepared and not yet read when it
        fetches beyond its ``predownload`` window.

        Under a limit the readers' shards ahead take at most a quarter of what it holds: the rest is for the
        shards being read and the ones read last, so a shard fetched ahead is never evicted for another before
        it is read. A limit too tight for that leaves only the ``predownload`` window.
        """
        most = PREPARED_AHEAD_PER_THREAD * self.prepare_threads()
        if self.limit is None:
            return most
        fits = self.limit // max(self.largest_shard, 1)
        return min(most, fits // (4 * max(readers, 1)))

    # ------------------------------------------------------------------ what is present

    def ready_flags(self) -> bytearray:
        """Per shard, 1 when this process has seen it present (the read loop checks it per sample)."""
        if self._ready is None:
            self._ready = bytearray(self.num_shards)
        return self._ready

    def present_on_disk(self, shard_id: int) -> bool:
        """Whether a shard's raw files are on disk, remembered for this process when they are.

        Under ``cache_limit`` this is always False: every shard goes through :meth:`prepare`, which also keeps
        the accounting.
        """
        if self.limit is not None:
            return False
        if self._raw_present(shard_id):
            self.ready_flags()[shard_id] = 1
            return True
        return False

    def _raw_present(self, shard_id: int) -> bool:
        """Whether every uncompressed file of a shard is on local disk (one ``stat`` each)."""
        stream_id, local_id = self.readers.locate(shard_id)
        stream = self.streams[stream_id]
        return all(os.path.exists(stream.local_path(name)) for name in self.tables[stream_id].raw_names(local_id))

    def touch(self, shard_id: int) -> None:
        """Record a read of the shard, for least-recently-used eviction."""
        self._last_read[shard_id] = time.time_ns()
        if self._accounting is not None:
            self._accounting.touch(shard_id)

    def forget(self, shard_id: int) -> None:
        """Forget that this process saw the shard present (its files vanished): the next read prepares it."""
        self.readers.forget(shard_id)
        if self._ready is not None:
            self._ready[shard_id] = 0

    # ------------------------------------------------------------------ node-wide state, opened on first use

    def _shard_locks(self, stream_id: int) -> ShardLocks:
        if self._locks is None:
            with _opening:
                if self._locks is None:
                    self._locks = [
                        ShardLocks(os.path.join(s.local, s.split), len(t)) for s, t in zip(self.streams, self.tables)
                    ]
        return self._locks[stream_id]

    def _accounting_in_use(self) -> CacheState | None:
        """The accounting when it must be kept: always under a limit, else once this process opened it."""
        return self._cache_state() if self.limit is not None else self._accounting

    def _cache_state(self) -> CacheState:
        if self._accounting is None:
            # Prepare threads all get here first thing; one opens the accounting, the others wait for it.
            with _opening:
                if self._accounting is None:
                    accounting = CacheState(
                        [os.path.join(s.local, s.split) for s in self.streams], self.num_shards, self._scan
                    )
                    accounting.merge_access_times(self._last_read)
                    self._accounting = accounting
        return self._accounting

    def _scan(self) -> tuple[np.ndarray, int]:
        """Bytes each shard has on local disk now (from the index's file list, one ``stat`` per file)."""
        present = np.zeros(self.num_shards, np.int64)
        for stream_id, (stream, table) in enumerate(zip(self.streams, self.tables)):
            offset = int(self._shard_offsets[stream_id])
            for local_id in range(len(table)):
                present[offset + local_id] = sum(
                    size for name, size in table.file_sizes(local_id) if os.path.exists(stream.local_path(name))
                )
        index_bytes = sum(stream.get_index_size() for stream in self.streams)
        return present, index_bytes

    # ------------------------------------------------------------------ preparing

    def prepare(self, shard_id: int, blocking: bool = True) -> None:
        """Make one shard's raw files present locally, evicting cold shards first when over the limit.

        With ``blocking=False``, return at once when another thread or process is preparing (or evicting) the
        shard; the caller then finds it present later, or prepares it again.
        """
        stream_id, local_id = self.readers.locate(shard_id)
        reader = self.readers[shard_id]
        locks = self._shard_locks(stream_id)
        with locks.hold(local_id) if blocking else locks.try_hold(local_id) as held:
            if not blocking and not held:
                return
            if self._raw_present(shard_id):
                self._record_present(shard_id, stream_id, reader)
            elif self.limit is None:
                self._fetch(stream_id, reader)
                self._record_present(shard_id, stream_id, reader)
            else:
                self._prepare_within_limit(shard_id, stream_id, reader, self.limit)
        self.ready_flags()[shard_id] = 1

    def prefetch(self, first_needs: Sequence[tuple[int, int]], lookahead: int, readers_on_node: int) -> Prefetcher:
        """A scheduler preparing, ahead of a reader that first needs each shard at the position ``first_needs``
        gives, the shards it will need (`streaming.dataset.prefetch`); ``readers_on_node`` readers share the
        node's ``cache_limit``."""
        return Prefetcher(self, first_needs, lookahead, readers_on_node)

    def _fetch(self, stream_id: int, reader: Reader) -> None:
        """Download, verify and decompress a shard's files (the caller holds its lock and made room for it)."""
        if self._own_prepare[stream_id]:
            self.streams[stream_id].prepare_shard(reader)
        else:
            self.fetchers[stream_id].fetch(reader)

    def _record_present(self, shard_id: int, stream_id: int, reader: Reader) -> None:
        """Account for a shard found or made present, and record the access."""
        accounting = self._accounting_in_use()
        if accounting is None:
            return
        if accounting.is_present(shard_id):
            accounting.touch(shard_id)
        else:
            accounting.mark_present(shard_id, self.fetchers[stream_id].present_bytes(reader))

    def _prepare_within_limit(self, shard_id: int, stream_id: int, reader: Reader, limit: int) -> None:
        """Make room for the shard, reserve its size while it downloads, then record what is really on disk.

        The reservation dies with this process, so a download killed mid-way never inflates the usage.
        """
        accounting = self._cache_state()
        # The peak (raw and compressed files side by side while decompressing), not what stays afterwards.
        needed = reader.get_max_size()
        deadline = time.monotonic() + (self.streams[stream_id].download_timeout or 60.0)
        while True:
            with accounting.lock():
                # Marked present but its raw files are gone: whatever was counted for it is stale.
                if accounting.is_present(shard_id):
                    accounting.mark_gone(shard_id)
                # Evicting and reserving under one cache lock: two preparers cannot both count on the same room.
                if self._evict_until(accounting, needed, limit):
                    accounting.mark_preparing(shard_id, needed)
                    break
            if time.monotonic() > deadline:
                raise ValueError(
                    f"cache_limit ({limit} bytes) is too low: {accounting.usage()} bytes are in "
                    f"use by shards that cannot be evicted (being read or downloaded) and shard "
                    f"{shard_id} needs {needed} more. Your cache limit may be too low."
                )
            time.sleep(_CACHE_RETRY_SECONDS)
        # Downloaded outside the cache lock, so the other processes keep reading and preparing meanwhile.
        try:
            self._fetch(stream_id, reader)
        except BaseException:
            accounting.mark_absent(shard_id, 0)
            raise
        accounting.mark_present(shard_id, self.fetchers[stream_id].present_bytes(reader))

    # ------------------------------------------------------------------ evicting

    def _evict_coldest_until(self, accounting: CacheState, done: Callable[[], bool]) -> int | None:
        """Evict evictable shards, least recently used first, until ``done()``; call with the cache lock held.

        Shards whose lock another thread or process holds (being prepared or evicted) are skipped. Returns the
        shard whose eviction made ``done()`` true, or None if it never did.
        """
        for victim in accounting.coldest(np.flatnonzero(self.evictable)):
            stream_id, local_id = self.readers.locate(victim)
            # Never wait for a shard lock while holding the cache lock: that shard's preparer may be waiting for
            # the cache lock. A busy shard is simply not a victim this time.
            with self._shard_locks(stream_id).try_hold(local_id) as held:
                if not held:
                    continue
                self._evict_held(victim)
            if done():
                return victim
        return None

    def _evict_until(self, accounting: CacheState, needed: int, limit: int) -> bool:
        """Evict until ``needed`` more bytes fit under ``limit`` (cache lock held); returns whether they fit."""

        def fits() -> bool:
            return accounting.usage() + needed <= limit

        return fits() or self._evict_coldest_until(accounting, fits) is not None

    def _evict_held(self, shard_id: int) -> None:
        """Delete a shard's files; the caller holds its shard lock."""
        stream_id, _ = self.readers.locate(shard_id)
        self.fetchers[stream_id].evict(self.readers[shard_id])
        accounting = self._accounting_in_use()
        if accounting is not None:
            accounting.mark_gone(shard_id)
        self.forget(shard_id)

    def evict(self, shard_id: int) -> None:
        """Delete one shard's local files; refused for a shard whose only copy is local (no remote)."""
        if not self.evictable[shard_id]:
            raise ValueError(f"Shard {shard_id} has no remote copy; refusing to delete its only copy.")
        stream_id, local_id = self.readers.locate(shard_id)
        with self._shard_locks(stream_id).hold(local_id):
            self._evict_held(shard_id)

    def evict_coldest(self) -> int:
        """Delete the least recently used evictable shard that no process is preparing; returns its id."""
        accounting = self._cache_state()
        with accounting.lock():
            victim = self._evict_coldest_until(accounting, lambda: True)
            present = accounting.coldest(np.arange(self.num_shards))
        if victim is not None:
            return victim
        if not present:
            raise ValueError(
                "Attempted shard eviction, but there are no shards present locally to evict. Your cache "
                "limit may be too low."
            )
        if not self.evictable[present].any():
            raise ValueError(
                "Attempted shard eviction, but every local shard belongs to a stream with `remote=None` and "
                "cannot be re-downloaded: its local copy is the only one."
            )
        raise ValueError(
            "Attempted shard eviction, but every evictable local shard is being prepared or evicted by another "
            "thread or process."
        )
