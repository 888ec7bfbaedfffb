"""Upstream's WebVid datasets: video clips stored inside the shards, or as one file per video beside them.

``StreamingInsideWebVid`` returns samples as stored. The "outside" ones read a sample's ``content_path``
(relative to ``extra_remote``), fetch that file into ``extra_local`` if it is not there yet, and add its bytes as
``content``: ``StreamingOutsideGIWebVid`` fetches when the sample is read, ``StreamingOutsideDTWebVid`` ahead of
iteration (up to ``predownload`` samples ahead, on a few threads), as upstream's download thread did.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from streaming.dataset.dataset import StreamingDataset
from streaming.storage.download import download_file
from streaming.storage.url import join_url

__all__ = ["StreamingInsideWebVid", "StreamingOutsideDTWebVid", "StreamingOutsideGIWebVid"]

_FETCH_THREADS = 4


class StreamingInsideWebVid(StreamingDataset):
    """WebVid with each video inside its sample; items are the stored samples."""

    def get_item(self, idx: int, retry: int = 7) -> dict[str, Any]:
        """The stored sample (upstream's signature, which names the index ``idx``)."""
        return super().get_item(idx, retry)


class _OutsideWebVid(StreamingDataset):
    """WebVid with videos as separate files under ``extra_remote``, cached in ``extra_local``.

    Args:
        extra_local: local directory of the video files.
        extra_remote: where the video files live (any supported URL or a local path).
        remote, local, …, shuffle_block_size: as for :class:`~streaming.StreamingDataset` (upstream's defaults).
    """

    def __init__(
        self,
        *,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        download_retry: int = 2,
        download_timeout: float = 60,
        validate_hash: str | None = None,
        keep_zip: bool = False,
        epoch_size: int | None = None,
        predownload: int | None = None,
        cache_limit: int | None = None,
        partition_algo: str = "orig",
        num_canonical_nodes: int | None = None,
        batch_size: int | None = None,
        shuffle: bool = False,
        shuffle_algo: str = "py1s",
        shuffle_seed: int = 9176,
        shuffle_block_size: int = 1 << 18,
        extra_local: str | None = None,
        extra_remote: str | None = None,
    ) -> None:
        super().__init__(
            remote=remote,
            local=local,
            split=split,
            download_retry=download_retry,
            download_timeout=download_timeout,
            validate_hash=validate_hash,
            keep_zip=keep_zip,
            epoch_size=epoch_size,
            predownload=predownload,
            cache_limit=cache_limit,
            partition_algo=partition_algo,
            num_canonical_nodes=num_canonical_nodes,
            batch_size=batch_size,
            shuffle=shuffle,
            shuffle_algo=shuffle_algo,
            shuffle_seed=shuffle_seed,
            shuffle_block_size=shuffle_block_size,
        )
        self.download_timeout = download_timeout
        self.extra_local = extra_local
        self.extra_remote = extra_remote

    def _fetch_content(self, sample: dict[str, Any]) -> str | None:
        """Make the sample's video file present locally; return its local path (``None``: no extra location)."""
        if not (self.extra_local and self.extra_remote):
            return None
        rel_path = sample["content_path"]
        local = os.path.join(self.extra_local, rel_path)
        if not os.path.exists(local):
            download_file(
                join_url(self.extra_remote, rel_path),
                local,
                retry=max(1, self.streams[0].download_retry or 1),
                timeout=self.download_timeout,
            )
        return local

    def get_item(self, idx: int, retry: int = 7) -> dict[str, Any]:
        return self._with_content(super().get_item(idx, retry))

    def _with_content(self, sample: dict[str, Any]) -> dict[str, Any]:
        """The stored sample with its video's bytes as ``content`` (fetched first if not local yet)."""
        local = self._fetch_content(sample)
        if local is not None:
            with open(local, "rb") as file:
                sample["content"] = file.read()
        return sample


class StreamingOutsideGIWebVid(_OutsideWebVid):
    """WebVid with videos outside the shards, each fetched when its sample is read ("GI": in get_item)."""


class StreamingOutsideDTWebVid(_OutsideWebVid):
    """WebVid with videos outside the shards, fetched ahead of iteration ("DT": in the download thread)."""

    def __iter__(self) -> Iterator[dict[str, Any]]:
        window: deque[tuple[dict[str, Any], Future]] = deque()
        lookahead = max(1, self.predownload)
        with ThreadPoolExecutor(_FETCH_THREADS, thread_name_prefix="webvid-fetch") as pool:
            # The stored samples, each completed by `_finish` once its video is fetched (not through `get_item`,
            # which would fetch it again, on this thread).
            for sample in self._iter_epoch(through_getitem=False):
                window.append((sample, pool.submit(self._fetch_content, sample)))
                if len(window) > lookahead:
                    yield self._finish(*window.popleft())
            while window:
                yield self._finish(*window.popleft())

    def _finish(self, sample: dict[str, Any], fetched: Future) -> dict[str, Any]:
        fetched.result()  # raises the download's error, if any
        return self._with_content(sample)
