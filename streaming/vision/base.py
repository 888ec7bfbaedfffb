"""`StreamingVisionDataset`: upstream's base of the image-classification datasets (samples ``{"x", "y"}``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming._extras import require
from streaming.dataset.dataset import StreamingDataset

__all__ = ["StandardTransform", "StreamingVisionDataset"]


class StandardTransform:
    """An input transform and a target transform applied together, as torchvision does.

    Without ``transform`` the input becomes a tensor through ``torchvision.transforms.functional.to_tensor``, as
    upstream; that is the only use of torchvision here (install ``mds-streaming[vision]`` for it).

    Args:
        transform: applied to the input.
        target_transform: applied to the target.
    """

    def __init__(self, transform: Callable | None = None, target_transform: Callable | None = None) -> None:
        self.transform = transform
        self.target_transform = target_transform

    def __call__(self, x: Any, y: Any) -> tuple[Any, Any]:
        if self.transform:
            x = self.transform(x)
        else:
            functional = require(
                "torchvision.transforms.functional", "vision", "Turning images into tensors without a transform"
            )
            x = functional.to_tensor(x)
        if self.target_transform:
            y = self.target_transform(y)
        return x, y


class StreamingVisionDataset(StreamingDataset):
    """An image dataset whose samples are ``{"x": image, "y": target}``; each item is ``transforms(x, y)``.

    Upstream also derives from ``torchvision.datasets.VisionDataset`` (for its ``repr`` only); this class does
    not, so that it works without torchvision when the transforms are plain callables.

    Args:
        transforms: a function of ``(x, y)``; exclusive with ``transform``/``target_transform``.
        transform: applied to ``x`` (default: to a tensor, which needs torchvision).
        target_transform: applied to ``y``.
        remote, local, …, shuffle_block_size: as for :class:`~streaming.StreamingDataset` (upstream's defaults).

    Raises:
        ValueError: ``transforms`` given with ``transform`` or ``target_transform``.
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
        batch_size: int,
        shuffle: bool = False,
        shuffle_algo: str = "py1s",
        shuffle_seed: int = 9176,
        shuffle_block_size: int = 1 << 18,
        transforms: Callable | None = None,
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
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError("Only transforms or transform/target_transform can be passed as an argument")
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = transforms if transforms is not None else StandardTransform(transform, target_transform)

    def get_item(self, idx: int, retry: int = 7) -> Any:
        sample = super().get_item(idx, retry)
        return self.transforms(sample["x"], sample["y"])
