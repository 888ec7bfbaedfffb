"""`StreamingCOCO`: COCO object detection as MDS shards (upstream's dataset and sample layout).

A sample holds ``img`` (an image), ``img_id``, the original height ``htot`` and width ``wtot``, ``bbox_sizes`` and
``bbox_labels``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.dataset.dataset import StreamingDataset

__all__ = ["StreamingCOCO"]


class StreamingCOCO(StreamingDataset):
    """COCO, streamed; each item is ``(img, img_id, (htot, wtot), bbox_sizes, bbox_labels)``, the image in RGB.

    Args:
        transform: a function of ``(img, (htot, wtot), bbox_sizes, bbox_labels)`` returning the same four.
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
        partition_algo: str = "orig",
        cache_limit: int | None = None,
        num_canonical_nodes: int | None = None,
        batch_size: int | None = None,
        shuffle: bool = False,
        shuffle_algo: str = "py1s",
        shuffle_seed: int = 9176,
        shuffle_block_size: int = 1 << 18,
        transform: Callable | None = None,
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
        self.transform = transform

    def get_item(self, idx: int, retry: int = 7) -> tuple[Any, ...]:
        sample = super().get_item(idx, retry)
        img = sample["img"].convert("RGB")
        size = sample["htot"], sample["wtot"]
        bbox_sizes, bbox_labels = sample["bbox_sizes"], sample["bbox_labels"]
        if self.transform:
            img, size, bbox_sizes, bbox_labels = self.transform(img, size, bbox_sizes, bbox_labels)
        return img, sample["img_id"], size, bbox_sizes, bbox_labels
