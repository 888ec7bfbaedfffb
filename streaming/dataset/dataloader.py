"""`StreamingDataLoader`: a DataLoader that counts the samples it yielded, for checkpoints of StreamingDataset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch import Tensor
from torch.utils.data import DataLoader

from streaming.dataset.dataset import StreamingDataset
from streaming.dataset.world import World


def batch_length(batch: Any) -> int:
    """Samples in one yielded batch: a mapping's first value, a tensor's first dimension, else ``batch[0]``."""
    if isinstance(batch, dict) or (hasattr(batch, "keys") and hasattr(batch, "values")):
        values = list(batch.values())
        if not values:
            raise ValueError("Batch is empty: a dict batch without columns has no samples to count.")
        return len(values[0])
    if isinstance(batch, Tensor):
        return len(batch)
    return len(batch[0])


class StreamingDataLoader(DataLoader):
    """`torch.utils.data.DataLoader` with ``state_dict``/``load_state_dict`` for mid-epoch resumption."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_samples_yielded = 0

    # torch declares __iter__ as returning its private _BaseDataLoaderIter; a generator that counts what it
    # yields is the documented way to extend it, so the narrower torch type cannot be kept.
    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        self.num_samples_yielded = 0
        for batch in super().__iter__():
            self.num_samples_yielded += batch_length(batch)
            yield batch

    def state_dict(self) -> dict[str, Any] | None:
        """The dataset's checkpoint for the samples all ranks have consumed, or None for other datasets."""
        if not isinstance(self.dataset, StreamingDataset):
            return None
        world = World.detect()
        num_ranks = world.num_ranks // (self.dataset.replication or 1)
        return self.dataset.state_dict(self.num_samples_yielded * num_ranks, False)

    def load_state_dict(self, obj: dict[str, Any]) -> None:
        """Resume the dataset from a checkpoint."""
        if isinstance(self.dataset, StreamingDataset):
            self.dataset.load_state_dict(obj)

    def __del__(self) -> None:
        iterator = getattr(self, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()
