"""Batches made in DataLoader workers and handed to the main process through a reused shared-memory ring.

A plain ``DataLoader(StreamingDataset, batch_size=B, num_workers=N)`` collates each batch in a worker into new
shared-memory tensors: one new segment per column per batch, created in the worker, passed by descriptor or name
and mapped again by the main process. That hand-over costs more than reading the 32 samples. `StreamingDataLoader`
instead runs an inner DataLoader over `WorkerBatches` (``batch_size=None``, the documented way for an iterable
dataset to yield whole batches):

* each worker takes ``batch_size`` consecutive samples from its own iterator, exactly as torch's fetcher does, so
  batches, their order across workers and ``drop_last`` are unchanged;
* with torch's default collate, the array and number columns are stacked straight into a slot of a ring of
  shared memory the worker created once (`Ring`); the main process maps the ring once (with the first batch) and
  each later batch crosses the queue as a small `RingBatch` naming its slot and layout;
* the main process's tensors are views into the slot; the slot returns to the worker when the last of them is
  freed. When every slot is still held (the caller keeps batches), the worker sends a batch the ordinary way, so
  nothing ever waits on the caller.

Columns the fast path does not cover (strings, bytes, nested structures, ragged arrays) are collated by torch's
``default_collate`` itself, so values, dtypes and error messages are torch's. A user's ``collate_fn`` runs in the
worker on the same lists of samples and its output is passed through unchanged.

With torch's default collate and a dataset that reads its stored samples (`columnar`), a worker does not read
samples one by one at all: it takes each batch from `StreamingDataset.iter_batches`, whose stacked columns are
exactly the tensors ``default_collate`` would make of the samples' values, and copies them into the slot as they
are (`collate_columns` outside a worker); list columns are collated by ``default_collate``.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, default_collate, get_worker_info
from torch.utils.data._utils.pin_memory import pin_memory as pin_structure

from streaming.format.columns import Columns
from streaming.format.mds.gather import BatchRead

# The ring's first bytes are one flag per slot (1: the main process may still hold it); slots follow, aligned so
# every column starts on a cache line and any dtype view of it is aligned.
HEADER_BYTES = 64
ALIGN = 64
MAX_SLOTS = HEADER_BYTES
# Batches a worker sends per message after its first (which has one, for a quick first batch): torch's costs
# per message (queues, feeder threads, pickling, its per-batch profiler hooks; ~300 µs of the main process's
# CPU here) are then shared by several batches. Measured per batch in the main process: 1 -> ~550 µs,
# 4 -> ~250 µs, 8 -> ~180 µs (benchmarks/loader_handover.py). Large batches travel fewer to a message, so that
# what is in flight stays near torch's own: at most MESSAGE_BYTES of samples per message.
BATCHES_PER_MESSAGE = 8
MESSAGE_BYTES = 4 << 20
# A ring holds at most this many bytes of slots: very large batches get fewer slots, and those that find none
# free take torch's own way, so memory stays bounded whatever the batch size.
RING_BYTES = 64 << 20

# A run of the ring layout: columns of one dtype and batched shape stored back to back as one block of shape
# (len(keys), *shape): (keys, numpy dtype string, shape of each batched column, byte offset in the slot). A batch of
# 100 float32 features then costs one copy into the slot and one block view out of it, not 100 of each.
RingColumns = tuple[tuple[str, ...], str, tuple[int, ...], int]


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def _stackable(column: list[Any]) -> tuple[np.dtype, tuple[int, ...]] | None:
    """The batched (dtype, shape) when ``default_collate`` would stack ``column`` into one tensor of the same values.

    Covers numeric numpy arrays of one dtype and shape, and exact Python ints (int64) and floats (float64);
    anything else (bools, numpy scalars, strings, ragged or non-native arrays) is left to torch.
    """
    first = column[0]
    kind = type(first)
    if any(type(value) is not kind for value in column):
        return None
    if kind is np.ndarray:
        dtype, shape = first.dtype, first.shape
        if dtype.kind not in "biufc" or not dtype.isnative:
            return None
        if any(value.dtype != dtype or value.shape != shape for value in column):
            return None
        return dtype, (len(column), *shape)
    if kind is int:
        return np.dtype(np.int64), (len(column),)
    if kind is float:
        return np.dtype(np.float64), (len(column),)
    return None


def _fill(out: np.ndarray, column: list[Any]) -> None:
    """Write a stackable column into ``out`` (its batched shape)."""
    if type(column[0]) is not np.ndarray:
        out[:] = column
    elif out.ndim > 1:
        # Joined along the first axis into the flattened batch: the same bytes as np.stack, at half its cost.
        np.concatenate(column, out=out.reshape(out.shape[0] * out.shape[1], *out.shape[2:]))
    else:
        np.stack(column, out=out)


class Ring:
    """A worker's shared-memory slots for batches: created once per worker, mapped once by the main process."""

    def __init__(self, slot_bytes: int, slots: int) -> None:
        self.slot_bytes = slot_bytes
        self.slots = slots
        self.key = f"{os.getpid()}-{uuid.uuid4().hex}"
        # Allocated in shared memory directly (not copied there): pages of slots never used stay unallocated.
        storage = torch.UntypedStorage._new_shared(HEADER_BYTES + slot_bytes * slots)
        self.tensor = torch.empty(0, dtype=torch.uint8).set_(storage)
        self.array = self.tensor.numpy()
        self.flags = self.array[:slots]
        self.flags[:] = 0
        self.sent = False

    def claim(self) -> int | None:
        """The first free slot, marked taken (low slots are reused, warm), or None when all are held."""
        for slot in range(self.slots):
            if not self.flags[slot]:
                self.flags[slot] = 1
                return slot
        return None

    def start(self, slot: int) -> int:
        """Byte offset of a slot in the ring."""
        return HEADER_BYTES + slot * self.slot_bytes


class MappedRing:
    """The main process's side of one worker's ring."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor
        self.array = tensor.numpy()
        self._watches: dict[int, list[weakref.ref]] = {}

    def release(self, slot: int) -> None:
        self._watches.pop(slot, None)
        self.array[slot] = 0

    def release_after(self, slot: int, arrays: list[np.ndarray]) -> None:
        """Give ``slot`` back to the worker once every array (each owned by one tensor's storage) is freed."""
        remaining = [len(arrays)]

        def freed(_: weakref.ref) -> None:
            remaining[0] -= 1
            if not remaining[0]:
                self.release(slot)

        self._watches[slot] = [weakref.ref(array, freed) for array in arrays]


# Rings the main process has mapped, by ring key; each loader removes its own when its workers end (see
# `forget_rings`). Batches keep their ring alive themselves, so removing an entry never invalidates a batch.
_mapped_rings: dict[str, MappedRing] = {}
_mapped_lock = threading.Lock()


def forget_rings(token: str) -> None:
    """Drop the main process's references to the rings of one loader (``token``)."""
    with _mapped_lock:
        for key in [key for key in _mapped_rings if key.startswith(token)]:
            del _mapped_rings[key]


def _rebuild(
    key: str,
    tensor: torch.Tensor | None,
    slot: int,
    start: int,
    layout: list[RingColumns],
    objects: dict[str, Any],
    order: list[str],
) -> RingBatch:
    with _mapped_lock:
        if tensor is not None:
            _mapped_rings[key] = MappedRing(tensor)
        ring = _mapped_rings[key]
    return RingBatch(ring, slot, start, layout, objects, order)


class RingBatch:
    """One batch that lives in a ring slot; `materialize` gives the dict of tensors ``default_collate`` would.

    Sent from a worker it pickles to the slot's coordinates (and, once per ring, the ring itself); rebuilt in the
    main process it holds the slot until materialized, then the tensors hold it. A batch dropped unread (an
    iterator shut down mid-epoch) gives its slot back too.
    """

    def __init__(
        self,
        ring: Ring | MappedRing,
        slot: int,
        start: int,
        layout: list[RingColumns],
        objects: dict[str, Any],
        order: list[str],
        key: str = "",
    ) -> None:
        self.ring = ring
        self.slot = slot
        self.start = start
        self.layout = layout
        self.objects = objects
        self.order = order
        self.key = key
        self._held = isinstance(ring, MappedRing)

    def __reduce__(self) -> tuple[Callable[..., RingBatch], tuple[Any, ...]]:
        ring = self.ring
        if not isinstance(ring, Ring):
            raise TypeError("A RingBatch is sent only from the worker that made it.")
        first = not ring.sent
        ring.sent = True
        tensor = ring.tensor if first else None
        return _rebuild, (self.key, tensor, self.slot, self.start, self.layout, self.objects, self.order)

    def materialize(self) -> dict[str, Any]:
        """The batch as a dict of tensors (and torch-collated objects), in the samples' key order."""
        ring = self.ring
        if not isinstance(ring, MappedRing) or not self._held:
            raise RuntimeError("A RingBatch is materialized once, in the main process.")
        self._held = False
        ring_array, start = ring.array, self.start
        tensors: dict[str, torch.Tensor] = {}
        columns: list[np.ndarray] = []
        for keys, dtype, shape, offset in self.layout:
            begin = start + offset
            block = ring_array[begin : begin + _nbytes(keys, dtype, shape)].view(dtype).reshape(len(keys), *shape)
            # A tensor of its own per column (as default_collate gives one storage per column), over its row.
            rows = list(block)
            columns.extend(rows)
            tensors.update(zip(keys, map(torch.from_numpy, rows)))
        # Each tensor's storage owns its row array and frees it with the last view of that tensor: the slot
        # returns to the worker once every one is freed.
        ring.release_after(self.slot, columns)
        objects = self.objects
        return {key: tensors[key] if key in tensors else objects[key] for key in self.order}

    def pin_memory(self) -> dict[str, Any]:
        """torch's pin-memory thread calls this: the materialized batch, pinned."""
        return pin_structure(self.materialize())

    def __del__(self) -> None:
        if getattr(self, "_held", False):
            self._held = False
            self.ring.release(self.slot)  # type: ignore[union-attr]


def _nbytes(keys: tuple[str, ...], dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes of a run of the ring layout."""
    return len(keys) * math.prod(shape) * np.dtype(dtype).itemsize


def _runs(
    columns: list[tuple[tuple[str, ...], np.dtype, tuple[int, ...]]], merge: bool = True
) -> tuple[list[RingColumns], int]:
    """The ring layout of ``(keys, dtype, batched shape of each)`` runs, each starting on a cache line; with ``merge``,
    consecutive ones of one dtype and shape are joined. Returns the layout and the bytes it takes."""
    runs: list[list[Any]] = []
    for keys, dtype, shape in columns:
        if merge and runs and runs[-1][1] == dtype.str and runs[-1][2] == shape:
            runs[-1][0].extend(keys)
        else:
            runs.append([list(keys), dtype.str, shape])
    layout: list[RingColumns] = []
    nbytes = 0
    for keys, dtype_name, shape in runs:
        layout.append((tuple(keys), dtype_name, shape, nbytes))
        nbytes = _aligned(nbytes + _nbytes(tuple(keys), dtype_name, shape))
    return layout, nbytes


class WorkerMessage:
    """What a worker sends per request: its id and a few consecutive batches."""

    def __init__(self, worker: int, batches: list[Any]) -> None:
        self.worker = worker
        self.batches = batches

    def pin_memory(self) -> WorkerMessage:
        """torch's pin-memory thread calls this: the same batches, materialized and pinned."""
        pinned = [
            batch.pin_memory() if isinstance(batch, RingBatch) else pin_structure(batch) for batch in self.batches
        ]
        return WorkerMessage(self.worker, pinned)


def in_batch_order(messages: Iterator[WorkerMessage], in_order: bool) -> Iterator[Any]:
    """The batches of the workers' messages in the order torch yields one batch per request.

    torch hands requests to the workers round robin and yields results in request order, skipping a worker once
    it is exhausted: batch ``i`` of every live worker, worker after worker, then batch ``i + 1``. Message ``m`` of
    every worker holds the same batch positions, so a round of messages (worker ids rising) is interleaved back
    position by position. Without ``in_order`` torch promises no order: batches come message after message.
    """
    if not in_order:
        for message in messages:
            yield from message.batches
        return
    round_: list[list[Any]] = []
    last_worker = -1
    for message in messages:
        if message.worker <= last_worker:
            yield from _interleave(round_)
            round_ = []
        round_.append(message.batches)
        last_worker = message.worker
    yield from _interleave(round_)


def _interleave(round_: list[list[Any]]) -> Iterator[Any]:
    for position in range(max((len(batches) for batches in round_), default=0)):
        for batches in round_:
            if position < len(batches):
                yield batches[position]


def pass_through(batch: Any) -> Any:
    """The inner DataLoader's collate_fn: workers send whole batches."""
    return batch


class WorkerBatches(IterableDataset):
    """Yield a dataset's samples as batches, collated in the process that iterates (a DataLoader worker).

    Args:
        dataset: the iterable dataset whose samples are batched.
        batch_size: samples per batch.
        drop_last: drop a last, incomplete batch (per worker, as torch's fetcher does).
        collate_fn: the user's collate function, or None for torch's ``default_collate`` with the ring fast path.
        slots: ring slots per worker.
        batches_per_message: batches a worker sends per message after its first; the same for every worker.
        columnar: read each batch at once with ``dataset.iter_batches`` (a StreamingDataset that reads its
            stored samples, with torch's default collate): the same batches, without a dict per sample.
    """

    def __init__(
        self,
        dataset: IterableDataset,
        batch_size: int,
        drop_last: bool,
        collate_fn: Callable[[list[Any]], Any] | None,
        slots: int,
        batches_per_message: int = BATCHES_PER_MESSAGE,
        columnar: bool = False,
    ) -> None:
        if columnar and collate_fn is not None:
            raise ValueError("Columnar batches are collated as torch's default_collate does: no collate_fn.")
        self.dataset = dataset
        self.columnar = columnar
        self.batches_per_message = batches_per_message
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.collate_fn = collate_fn
        self.slots = max(2, min(slots, MAX_SLOTS))
        self.token = uuid.uuid4().hex
        self._ring: Ring | None = None

    def __iter__(self) -> Iterator[WorkerMessage]:
        info = get_worker_info()
        worker = 0 if info is None else info.id
        # Every worker groups its batches alike (1, then batches_per_message each), so message m of each worker
        # covers the same batch positions and the main process can restore the per-batch round robin.
        if self.columnar:
            yield from self._columnar_messages(worker, info is not None)
            return
        batches = self._sample_batches(info is not None)
        group = 1
        while True:
            message = list(itertools.islice(batches, group))
            if message:
                yield WorkerMessage(worker, message)
            if len(message) < group:
                return
            group = self.batches_per_message

    def _sample_batches(self, in_worker: bool) -> Iterator[Any]:
        """Batches of ``batch_size`` consecutive samples, as torch's fetcher takes them, collated."""
        samples = iter(self.dataset)
        while True:
            batch = list(itertools.islice(samples, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self._collate(batch, in_worker)

    def _columnar_messages(self, worker: int, in_worker: bool) -> Iterator[WorkerMessage]:
        """The same batches, each message's read at once as columns (`StreamingDataset.iter_batch_reads`)."""
        size = self.batch_size
        counts = itertools.chain([1], itertools.repeat(self.batches_per_message))
        reads = self.dataset.iter_batch_reads(size, self.drop_last, counts)  # type: ignore[attr-defined]
        for read in reads:
            starts = range(0, read.count, size)
            if in_worker:
                batches = [self._read_to_ring(read, start, min(start + size, read.count)) for start in starts]
            else:
                batches = [collate_columns(read.columns(start, start + size)) for start in starts]
            yield WorkerMessage(worker, batches)

    def _collate(self, batch: list[Any], in_worker: bool) -> Any:
        if self.collate_fn is not None:
            return self.collate_fn(batch)
        return self._collate_to_ring(batch) if in_worker else collate_values(batch)

    def _collate_to_ring(self, batch: list[Any]) -> Any:
        first = batch[0]
        if type(first) is not dict:
            return collate_values(batch)
        stacked: list[tuple[str, np.dtype, tuple[int, ...]]] = []
        objects: dict[str, Any] = {}
        columns: dict[str, list[Any]] = {}
        for key in first:
            column = [sample[key] for sample in batch]
            stack = _stackable(column)
            if stack is None:
                objects[key] = collate_values(column)
                continue
            stacked.append((key, *stack))
            columns[key] = column

        layout, nbytes = _runs([((key,), dtype, shape) for key, dtype, shape in stacked])

        def fill(blocks: list[np.ndarray]) -> None:
            for block, (keys, _, _, _) in zip(blocks, layout):
                for row, key in zip(block, keys):
                    _fill(row, columns[key])

        return self._to_ring(layout, nbytes, objects, list(first), fill, lambda: collate_values(batch))

    def _read_to_ring(self, read: BatchRead, start: int, stop: int) -> Any:
        """Rows ``start..stop`` of a batch read as columns, its stacked columns copied straight from the shards into
        a ring slot."""
        if any(dtype.kind not in "biufc" or not dtype.isnative for _, dtype, _ in read.runs):
            return collate_columns(read.columns(start, stop))
        runs = [(keys, dtype, (stop - start, *shape[1:])) for keys, dtype, shape in read.runs]
        layout, nbytes = _runs(runs, merge=False)
        objects = {key: collate_values(values[start:stop]) for key, values in read.lists.items()}
        return self._to_ring(
            layout,
            nbytes,
            objects,
            list(read.keys),
            lambda blocks: read.fill(blocks, start, stop),
            lambda: collate_columns(read.columns(start, stop)),
        )

    def _to_ring(
        self,
        layout: list[RingColumns],
        nbytes: int,
        objects: dict[str, Any],
        order: list[str],
        fill: Callable[[list[np.ndarray]], Any],
        otherwise: Callable[[], Any],
    ) -> Any:
        """A `RingBatch` of ``layout``'s runs, their blocks (one per run) filled by ``fill(blocks)`` in a free slot;
        ``otherwise()`` when there is none."""
        ring = self._ring
        if ring is None and layout:
            ring = self._ring = Ring(nbytes, max(2, min(self.slots, RING_BYTES // max(nbytes, 1))))
        slot = ring.claim() if ring is not None and nbytes <= ring.slot_bytes else None
        if ring is None or slot is None:
            # No slot free (the caller holds them all) or a batch larger than a slot: torch's own way.
            return otherwise()
        start = ring.start(slot)
        area = ring.array[start : start + nbytes]
        blocks = [
            area[offset : offset + _nbytes(keys, dtype_name, shape)].view(dtype_name).reshape(len(keys), *shape)
            for keys, dtype_name, shape, offset in layout
        ]
        try:
            fill(blocks)
        except (OverflowError, ValueError, TypeError):
            ring.flags[slot] = 0
            return otherwise()
        return RingBatch(ring, slot, start, layout, objects, order, self.token + ring.key)


def _writable(value: Any) -> Any:
    """``value``, with a read-only numpy array (a view of a shard) copied, in a sample or at its top level."""
    if type(value) is np.ndarray and not value.flags.writeable:
        return value.copy()
    if type(value) is dict:
        return {key: _writable(item) for key, item in value.items()}
    return value


def collate_values(batch: list[Any]) -> Any:
    """``default_collate`` of samples or of one column's values, the same tensors, errors and messages; but torch
    never wraps a read-only array, which it warns about on every loop ("The given NumPy array is not writable"):
    decoded arrays are read-only views of their shard, so those that reach torch here are copied first."""
    return default_collate([_writable(value) for value in batch])


def _collate_column(column: Any) -> Any:
    """One column of a batch read as columns, as ``default_collate`` makes it of the samples' values."""
    return torch.from_numpy(column) if isinstance(column, np.ndarray) else collate_values(column)


def collate_columns(batch: Columns) -> dict[str, Any]:
    """A batch read as columns, as ``default_collate`` makes it of the samples (a dict in their key order)."""
    return {key: _collate_column(column) for key, column in batch.items()}
