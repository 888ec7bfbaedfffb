"""`StreamingADE20K`: ADE20K scene parsing as MDS shards of ``{"x": image, "y": annotation image}`` samples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.dataset.dataset import StreamingDataset

__all__ = ["StreamingADE20K"]


class StreamingADE20K(StreamingDataset):
    """ADE20K, streamed; each item is ``(x, y)`` after the transforms, in upstream's order.

    Args:
        joint_transform: a function of the pair ``(x, y)``, applied first.
        transform: applied to the image ``x``.
        target_transform: applied to the annotation ``y``.
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
        joint_transform: Callable | None = None,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
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
        self.joint_transform = joint_transform
        self.transform = transform
        self.target_transform = target_transform

    def get_item(self, idx: int, retry: int = 7) -> tuple[Any, Any]:
        sample = super().get_item(idx, retry)
        x, y = sample["x"], sample["y"]
        if self.joint_transform:
            x, y = self.joint_transform((x, y))
        if self.transform:
            x = self.transform(x)
        if self.target_transform:
            y = self.target_transform(y)
        return x, y
