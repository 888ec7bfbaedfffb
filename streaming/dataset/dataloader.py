"""`StreamingDataLoader`: a DataLoader that counts the samples it yielded, for checkpoints of StreamingDataset.

With worker processes over a StreamingDataset, batches are made in the workers and handed over through a reused
shared-memory ring (`streaming.dataset.handover`): same batches, same order, several times fewer costs per batch.
``STREAMING_LOADER_HANDOVER=torch`` turns that off (torch's own per-batch collation and hand-over).

With torch's default collate over a dataset that reads its stored samples (no ``__getitem__``/``get_item`` of
its own), each batch is read at once, column by column (`StreamingDataset.iter_batches`), in the workers or,
without workers, in this process: the same batches as collating the samples one by one, which a ``collate_fn``
of your own, such a subclass, or ``STREAMING_BATCH_READS=0`` keeps.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from torch import Tensor
from torch.utils.data import DataLoader, default_collate

from streaming.dataset.dataset import StreamingDataset, overrides_item_access
from streaming.dataset.handover import (
    BATCHES_PER_MESSAGE,
    MESSAGE_BYTES,
    RingBatch,
    WorkerBatches,
    collate_columns,
    forget_rings,
    in_batch_order,
    pass_through,
)
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


#: What torch says when its default collate meets samples of one column with different shapes.
UNEQUAL_SHAPES = ("stack expects each tensor to be equal size", "Trying to resize storage that is not resizable")
#: How many samples the message looks at to name the columns whose shapes differ.
SHAPE_PROBE = 256


def unequal_shapes_message(dataset: Any) -> str:
    """The sentence for a default collate that met arrays of different shapes, naming the columns it can find."""
    shapes: dict[str, set[tuple[int, ...]]] = {}
    for index in range(min(SHAPE_PROBE, len(dataset))):
        sample = dataset[index]
        for name, value in sample.items() if isinstance(sample, dict) else ():
            shapes.setdefault(name, set()).add(tuple(getattr(value, "shape", ())))
    varying = sorted(name for name, seen in shapes.items() if len(seen) > 1)
    columns = f"column(s) {varying}" if varying else "a column"
    return (
        f"StreamingDataLoader's default collate stacks each column of a batch into one tensor, and {columns} "
        f"hold arrays of different shapes (an ndarray or list encoding without a fixed shape): pass a collate_fn "
        f"that pads them or keeps them as lists, or write the column with a fixed shape (e.g. ndarray:int32:2048)."
    )


class StreamingDataLoader(DataLoader):
    """`torch.utils.data.DataLoader` with ``state_dict``/``load_state_dict`` for mid-epoch resumption."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_samples_yielded = 0
        self._worker_batches: DataLoader | None = None
        self._ring_token: str | None = None

    # torch declares __iter__ as returning its private _BaseDataLoaderIter; a generator that counts what it
    # yields is the documented way to extend it, so the narrower torch type cannot be kept.
    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        try:
            yield from self._iterate()
        except RuntimeError as err:
            # torch's words for samples of different shapes (in process, or from a worker's shared memory).
            if self.collate_fn is not default_collate or not any(text in str(err) for text in UNEQUAL_SHAPES):
                raise
            raise RuntimeError(unequal_shapes_message(self.dataset)) from err

    def _iterate(self) -> Iterator[Any]:
        self.num_samples_yielded = 0
        # Without workers (and without pinning, which torch's own iterator decides per accelerator).
        if self.num_workers == 0 and not self.pin_memory and self._reads_columns():
            for batch in self._batches_in_process():
                self.num_samples_yielded += batch_length(batch)
                yield batch
            return
        inner = self._batches_from_workers()
        if inner is None:
            for batch in super().__iter__():
                self.num_samples_yielded += batch_length(batch)
                yield batch
            return
        try:
            for batch in in_batch_order(iter(inner), self.in_order):
                if isinstance(batch, RingBatch):
                    batch = batch.materialize()
                self.num_samples_yielded += batch_length(batch)
                yield batch
        finally:
            if not self.persistent_workers and self._ring_token is not None:
                forget_rings(self._ring_token)

    def _reads_columns(self) -> bool:
        """Whether batches are read as columns: torch's default collate over a dataset reading stored samples."""
        return (
            isinstance(self.dataset, StreamingDataset)
            and self.batch_size is not None
            and self.collate_fn is default_collate
            and not overrides_item_access(type(self.dataset))
            and os.environ.get("STREAMING_BATCH_READS", "1") != "0"
        )

    def _batches_in_process(self) -> Iterator[Any]:
        """Without workers: the batches torch's single-process loader makes, read as columns."""
        assert isinstance(self.dataset, StreamingDataset) and self.batch_size is not None
        for columns in self.dataset.iter_batches(self.batch_size, self.drop_last):
            yield collate_columns(columns)

    def _batches_from_workers(self) -> DataLoader | None:
        """The inner DataLoader whose workers yield whole batches, when this loader's setup allows one."""
        if self._worker_batches is not None:
            return self._worker_batches
        if (
            not isinstance(self.dataset, StreamingDataset)
            or self.num_workers == 0
            or self.batch_size is None
            or os.environ.get("STREAMING_LOADER_HANDOVER") == "torch"
        ):
            return None
        prefetch = self.prefetch_factor or 2
        dataset = self.dataset
        sample_bytes = dataset.bytes_per_sample
        per_message = int(max(1, min(BATCHES_PER_MESSAGE, MESSAGE_BYTES // max(1.0, sample_bytes * self.batch_size))))
        batches = WorkerBatches(
            dataset,
            self.batch_size,
            self.drop_last,
            None if self.collate_fn is default_collate else self.collate_fn,
            # Batches of the messages a worker may have outstanding (prefetch), of the one the main process is
            # yielding from and of the one the worker is filling, plus a few the caller still holds.
            slots=per_message * (prefetch + 2) + 4,
            batches_per_message=per_message,
            columnar=self._reads_columns(),
        )
        self._ring_token = batches.token
        self._worker_batches = DataLoader(
            batches,
            batch_size=None,
            num_workers=self.num_workers,
            collate_fn=pass_through,
            pin_memory=self.pin_memory,
            timeout=self.timeout,
            worker_init_fn=self.worker_init_fn,
            multiprocessing_context=self.multiprocessing_context,
            generator=self.generator,
            prefetch_factor=self.prefetch_factor,
            persistent_workers=self.persistent_workers,
            pin_memory_device=self.pin_memory_device,
            in_order=self.in_order,
        )
        return self._worker_batches

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
        token = self.__dict__.get("_ring_token")
        if token is not None:
            forget_rings(token)
