"""`Prefetcher`: prepare, on a few threads, the shards a reader will need, in the order it first needs them.

A reader (one DataLoader worker's iteration) tells the prefetcher each position it reaches (`reached`). Shards
already on local disk cost one ``stat`` per epoch; when all are, nothing runs. Otherwise a pool of
`ShardCache.prepare_threads` threads prepares the missing ones: every shard first needed within ``lookahead``
samples of the reader (upstream's ``predownload`` window), and beyond it one shard per idle thread, up to
`ShardCache.shards_ahead` shards prepared and not yet read (the disk it may take ahead of the reader, within
``cache_limit``). A preparing thread starts the next shard itself as it finishes one: left to the reader, that
waited while the reader was busy between samples (collating, handing a batch over), and a DataLoader worker
reading from a loopback S3 server waited for shards 30 % of its epoch with one connection in four idle.

Prefetch threads skip a shard another thread or process is preparing (`ShardCache.prepare(blocking=False)`):
the DataLoader workers of a rank want the same shards at about the same time, and one that waited for another's
download would hold a connection idle. A skipped shard is found present when read, or prepared then.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Protocol


class PreparingCache(Protocol):
    """What a prefetch schedule needs of the shard cache (a `streaming.dataset.shard_cache.ShardCache`). Named here
    so that this module, which the cache uses, does not import it back."""

    def ready_flags(self) -> bytearray: ...

    def present_on_disk(self, shard_id: int) -> bool: ...

    def prepare_threads(self) -> int: ...

    def shards_ahead(self, readers: int) -> int: ...

    def prepare(self, shard_id: int, blocking: bool = True) -> None: ...


class Prefetcher:
    """The prefetch schedule of one reader's pass over ``shard_ids`` (a context manager: it stops its threads).

    Args:
        cache: the dataset's shard cache (it prepares the shards).
        first_needs: ``(position, shard)`` of every shard the reader will read, at the position of the sample
            that first needs it, by position (`streaming.dataset.share.first_needs`).
        lookahead: samples ahead of the reader whose shards are always being prepared (``predownload``).
        readers_on_node: readers sharing the node's ``cache_limit`` (DataLoader workers of every rank here).
    """

    def __init__(
        self, cache: PreparingCache, first_needs: Sequence[tuple[int, int]], lookahead: int, readers_on_node: int
    ) -> None:
        self.cache = cache
        ready = cache.ready_flags()
        missing = [
            (position, shard)
            for position, shard in first_needs
            if not ready[shard] and not cache.present_on_disk(shard)
        ]
        #: ``(position of first need, shard)`` of the shards not prepared yet, in that order.
        self.queue = deque(missing)
        self.lookahead = max(lookahead, 1)
        self.threads = cache.prepare_threads()
        self.most_ahead = cache.shards_ahead(readers_on_node)
        self._lock = threading.Lock()
        self._pending: dict[int, Future] = {}  # submitted and not yet reached by the reader
        self._running = 0  # submitted and not finished
        self._reader_at = 0
        self._closed = False
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="shard-prepare") if missing else None

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def reached(self, position: int, shard_id: int) -> None:
        """The reader is about to read its sample ``position``, of shard ``shard_id``: start what is due, and
        wait for that shard if it is being prepared."""
        if self._pool is None:
            return
        self._reader_at = position
        if self.queue and self.queue[0][0] < position + self.lookahead:
            with self._lock:
                self._submit_more()
        # Whether or not its preparation has ended, a shard the reader reaches leaves the window of shards
        # prepared ahead.
        future = self._pending.get(shard_id)
        if future is None:
            return
        try:
            future.result()
        except FileNotFoundError:
            pass  # its files vanished while it was prepared (someone cleaned the disk): the read prepares it again
        with self._lock:
            del self._pending[shard_id]
            self._submit_more()  # its place in the window is free

    def close(self) -> None:
        """Cancel what has not started and wait for the threads."""
        if self._pool is None:
            return
        with self._lock:
            self._closed = True
            for future in self._pending.values():
                future.cancel()
        self._pool.shutdown(wait=True)

    def _submit_more(self) -> None:
        """With the lock held: every shard first needed within ``lookahead`` samples of the reader; beyond that,
        one shard per idle thread, up to ``most_ahead`` prepared and not yet read."""
        assert self._pool is not None
        while (
            self.queue
            and not self._closed
            and (
                self.queue[0][0] < self._reader_at + self.lookahead
                or (self._running < self.threads and len(self._pending) < self.most_ahead)
            )
        ):
            upcoming = self.queue.popleft()[1]
            self._running += 1
            self._pending[upcoming] = self._pool.submit(self._prepare_then_submit_more, upcoming)

    def _prepare_then_submit_more(self, shard_id: int) -> None:
        try:
            self.cache.prepare(shard_id, blocking=False)
        finally:
            with self._lock:
                self._running -= 1
                self._submit_more()
