"""The epoch plan: which sample every node, rank, worker and batch reads (``generate_work``).

``generate_work`` combines resampling (`weighting`), partitioning (`partition`) and shuffling
(`shuffle`) into an int64 array of shape ``(nodes, ranks per node, workers per rank, batches per
worker, batch size)`` of global sample ids, -1 where there is none. Batching methods:

* ``random``: global batches mix samples from all streams at random;
* ``stratified``: every global batch has the same number of samples from each stream;
* ``per_stream``: every global batch comes from a single stream;
* ``device_per_stream``: every device batch comes from a single stream.

Its memory is estimated and checked first (`plan_memory.check_plan_memory`).

Resumption (``sample_in_epoch``) is exact for ``random``; the other methods resume at the last
global-batch boundary. Results are identical to upstream ``streaming.base.batching``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from streaming.dataset.partition import get_partitions
from streaming.dataset.plan_memory import check_plan_memory
from streaming.dataset.shuffle import get_shuffle
from streaming.dataset.weighting import resample_streams
from streaming.dataset.world import World

logger = logging.getLogger(__name__)

WorkFn = Callable[[Any, World, int, int], NDArray[np.int64]]

_PREDOWNLOAD_BATCHES = 8
_PREDOWNLOAD_WITHOUT_BATCH_SIZE = 64
#: Sample ids compared at once when checking that an epoch is its samples in id order.
_IDENTITY_CHUNK = 1 << 20


def default_predownload(batch_size: int | None) -> int:
    """Upstream's default ``predownload``: 8 batches, or 64 samples when batch_size is unknown."""
    if batch_size is None:
        return _PREDOWNLOAD_WITHOUT_BATCH_SIZE
    return _PREDOWNLOAD_BATCHES * batch_size


@dataclass(frozen=True, eq=False)
class PlanInputs:
    """Everything the epoch plan depends on, as plain numbers and int64/float64 arrays.

    ``samples_per_shard`` lists the shards of all streams, stream after stream;
    ``shards_per_stream``, ``choose_per_stream`` and ``proportion_per_stream`` have one entry
    per stream (see `weighting.resolve_weights`). The settings mirror the StreamingDataset
    arguments of the same names, with defaults (``num_canonical_nodes``,
    ``shuffle_block_size``) already filled in.
    """

    samples_per_shard: NDArray[np.int64]
    shards_per_stream: NDArray[np.int64]
    choose_per_stream: NDArray[np.int64]
    proportion_per_stream: NDArray[np.float64]
    epoch_size: int
    batch_size: int
    num_canonical_nodes: int
    partition_algo: str = "relaxed"
    shuffle: bool = False
    shuffle_algo: str = "py1e"
    shuffle_seed: int = 9176
    shuffle_block_size: int | None = None
    sampling_method: str = "balanced"
    sampling_granularity: int = 1
    initial_physical_nodes: int | None = None
    batching_method: str = "random"

    def __post_init__(self) -> None:
        for name, dtype in (
            ("samples_per_shard", np.int64),
            ("shards_per_stream", np.int64),
            ("choose_per_stream", np.int64),
            ("proportion_per_stream", np.float64),
        ):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype).reshape(-1))
        if not isinstance(self.batch_size, (int, np.integer)) or self.batch_size < 1:
            raise ValueError(
                f"Please pass `batch_size` to StreamingDataset. It should be set the same as the DataLoader's "
                f"per-device batch size (a positive int, got {self.batch_size!r}): it is needed for "
                f"deterministic resumption."
            )
        if self.num_canonical_nodes is None:
            raise RuntimeError("`num_canonical_nodes` can never be None. Provide a positive integer.")
        if self.shuffle and not isinstance(self.shuffle_block_size, (int, np.integer)):
            raise TypeError(
                f"Dataset `shuffle_block_size` must be an integer. Got {type(self.shuffle_block_size)} instead "
                f"(it must be an int when shuffling)."
            )
        num_streams = len(self.shards_per_stream)
        for name in ("choose_per_stream", "proportion_per_stream"):
            if len(getattr(self, name)) != num_streams:
                raise ValueError(
                    f"`{name}` has {len(getattr(self, name))} entries but there are {num_streams} streams."
                )
        if int(self.shards_per_stream.sum()) != len(self.samples_per_shard):
            raise ValueError(
                f"`shards_per_stream` adds up to {int(self.shards_per_stream.sum())} "
                f"shards but `samples_per_shard` has {len(self.samples_per_shard)}."
            )

    @property
    def num_streams(self) -> int:
        """Number of streams."""
        return len(self.shards_per_stream)

    @property
    def epoch_seed_change(self) -> bool:
        """Whether the order of stream origins (per_stream, device_per_stream) changes per epoch."""
        return self.shuffle and self.sampling_method == "balanced"

    @classmethod
    def from_dataset(cls, dataset: Any) -> PlanInputs:
        """Read the plan inputs from any object with attributes of the same names.

        ``dataset`` may be a `PlanInputs`, or an object (such as a StreamingDataset) with the
        attributes ``samples_per_shard``, ``shards_per_stream``, ``epoch_size``, ``batch_size``,
        ``num_canonical_nodes``, ``partition_algo``, ``shuffle``, ``shuffle_algo``,
        ``shuffle_seed``, ``shuffle_block_size``, ``sampling_method``,
        ``sampling_granularity`` and ``initial_physical_nodes`` (``batching_method`` optional).
        Per-stream weights come from ``choose_per_stream`` / ``proportion_per_stream`` if
        present, else from ``dataset.streams[i].choose`` / ``.proportion`` (upstream style).
        """
        if isinstance(dataset, PlanInputs):
            return dataset
        values: dict[str, Any] = {}
        missing = []
        for field in fields(cls):
            if hasattr(dataset, field.name):
                values[field.name] = getattr(dataset, field.name)
            elif field.name in ("choose_per_stream", "proportion_per_stream") and hasattr(dataset, "streams"):
                attribute = field.name.removesuffix("_per_stream")
                values[field.name] = [getattr(stream, attribute) for stream in dataset.streams]
            elif field.name != "batching_method":
                missing.append(field.name)
        if missing:
            raise TypeError(f"{type(dataset).__name__} lacks the epoch-plan attributes {missing}.")
        return cls(**values)

    def resample(self, epoch: int, stream_id: int | None = None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(shuffle_units, sample_ids)`` of this epoch, for all streams or just ``stream_id``."""
        return resample_streams(
            self.samples_per_shard,
            self.shards_per_stream,
            self.choose_per_stream,
            self.shuffle_seed,
            epoch,
            self.sampling_method,
            self.sampling_granularity,
            self.shuffle,
            stream_id,
        )

    def stream_positions(
        self, epoch: int, stream_id: int, num_physical_nodes: int, world: World, batch_size: int
    ) -> NDArray[np.int64]:
        """Partition one stream on its own and map positions to global sample ids.

        The stream's shuffle window is the dataset's scaled by the stream's proportion (at least 1); a stream
        with fewer samples than canonical nodes is not shuffled.
        """
        units, sample_ids = self.resample(epoch, stream_id)
        partition = get_partitions(
            self.partition_algo,
            len(sample_ids),
            self.num_canonical_nodes,
            num_physical_nodes,
            world.ranks_per_node,
            world.workers_per_rank,
            batch_size,
            0,
            self.initial_physical_nodes,
        )
        if self.shuffle and len(sample_ids) < self.num_canonical_nodes:
            # As upstream: a shuffle needs a sample per canonical node, so such a stream stays in order.
            logger.warning(
                "Stream with index %d has %d samples, fewer than the %d canonical nodes, so its samples are "
                "repeated and not shuffled.",
                stream_id,
                len(sample_ids),
                self.num_canonical_nodes,
            )
        elif self.shuffle:
            block_size = max(1, int(self.shuffle_block_size * self.proportion_per_stream[stream_id]))
            order = get_shuffle(
                self.shuffle_algo, units, self.num_canonical_nodes, self.shuffle_seed, epoch, block_size
            )
            sample_ids = sample_ids[order]
        return _lookup(sample_ids, partition)


def _is_identity(ids: NDArray[np.int64]) -> bool:
    """Whether ``ids[k] == k`` for every ``k``, compared a chunk at a time (no temporary of the epoch's size)."""
    for start in range(0, len(ids), _IDENTITY_CHUNK):
        chunk = ids[start : start + _IDENTITY_CHUNK]
        if not np.array_equal(chunk, np.arange(start, start + len(chunk))):
            return False
    return True


def _lookup(table: NDArray[np.int64], positions: NDArray[np.int64]) -> NDArray[np.int64]:
    """``table[positions]``, keeping -1 (no sample) as -1."""
    out = table[positions]
    out[positions < 0] = -1
    return out


def _traversal_order(partition: NDArray[np.int64]) -> NDArray[np.int64]:
    """Flatten (nodes, ranks, workers, batches, batch) in the order batches are consumed."""
    return partition.transpose(3, 2, 0, 1, 4).reshape(-1)


def _count_full(rows: NDArray[np.int64]) -> int:
    """Number of rows without -1."""
    return int(np.count_nonzero(rows.min(axis=1) >= 0)) if rows.size else 0


def _interleave_origins(rng: np.random.Generator, rows_per_stream: list[int]) -> NDArray[np.int64]:
    """Shuffle which stream each batch comes from, keeping each stream's own batch order.

    Returns the index, into the streams' batches concatenated, of the batch at each position.
    """
    origins = np.repeat(np.arange(len(rows_per_stream)), rows_per_stream)
    rng.shuffle(origins)
    picks = np.empty(len(origins), np.int64)
    picks[np.argsort(origins, kind="stable")] = np.arange(len(origins))
    return picks


def _finish(
    global_batches: NDArray[np.int64], world: World, batch_size: int, sample_in_epoch: int, method: str
) -> NDArray[np.int64]:
    """Drop consumed global batches, pad to whole worker rounds and shape the result."""
    global_batch_size = global_batches.shape[1]
    if sample_in_epoch % global_batch_size:
        message = (
            f"Because of the `{method}` batching method, resumption may only occur on a sample that is a "
            f"multiple of the current global batch size of {global_batch_size}. Resuming training after the "
            f"most recently finished global batch (sample_in_epoch {sample_in_epoch} is rounded down)."
        )
        # Upstream warns through `warnings` for stratified and through its logger for the others.
        if method == "stratified":
            warnings.warn(message, stacklevel=2)
        else:
            logger.warning(message)
    rows = global_batches[sample_in_epoch // global_batch_size :]
    padding = (-len(rows)) % world.workers_per_rank
    if padding:
        rows = np.concatenate([rows, np.full((padding, global_batch_size), -1, np.int64)])
    shaped = rows.reshape(-1, world.workers_per_rank, world.num_nodes, world.ranks_per_node, batch_size)
    return shaped.transpose(2, 3, 1, 0, 4)


def generate_work_random_batching(dataset: Any, world: World, epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
    """``random`` batching: one partition of the whole resampled epoch."""
    plan = PlanInputs.from_dataset(dataset)
    units, sample_ids = plan.resample(epoch)
    # Every sample once, in id order (no weights): the epoch's positions are its sample ids, so that array is not
    # kept through the shuffle, whose working arrays are the largest of the plan.
    table = None if _is_identity(sample_ids) else sample_ids
    del sample_ids
    # Shuffled before partitioning (neither draws from the other's generator): the shuffle's working arrays then
    # never coexist with the partition's, which halves the peak memory of a plan.
    if plan.shuffle:
        # EpochPlan refuses to shuffle without an int block size (see its __post_init__).
        block_size = cast(int, plan.shuffle_block_size)
        order = get_shuffle(plan.shuffle_algo, units, plan.num_canonical_nodes, plan.shuffle_seed, epoch, block_size)
        table = order if table is None else table[order]
        del order
    positions = get_partitions(
        plan.partition_algo,
        plan.epoch_size,
        plan.num_canonical_nodes,
        world.num_nodes,
        world.ranks_per_node,
        world.workers_per_rank,
        plan.batch_size,
        sample_in_epoch,
        plan.initial_physical_nodes,
    )
    return positions if table is None else _lookup(table, positions)


def _stratified_slots(plan: PlanInputs, global_batch_size: int) -> NDArray[np.int64]:
    """Samples of each stream per global batch: floor of its share, deficit to largest leftovers."""
    exact = global_batch_size * plan.proportion_per_stream
    slots = (plan.proportion_per_stream * global_batch_size).astype(np.int64)
    missing = global_batch_size - int(slots.sum())
    if missing:
        slots[np.flip(np.argsort(exact - slots))[:missing]] += 1
    for stream_id, count in enumerate(slots.tolist()):
        if count <= 0:
            raise ValueError(
                f"Number of samples for stream {stream_id} is {count} because the portion of this stream in "
                f"the global batch, which is of size {global_batch_size}, is too low. Please increase the "
                f"global batch size or increase the proportion of total samples that come from stream "
                f"{stream_id} (`stratified` batching)."
            )
    return slots


def generate_work_stratified_batching(
    dataset: Any, world: World, epoch: int, sample_in_epoch: int
) -> NDArray[np.int64]:
    """``stratified`` batching: each global batch takes a fixed slot count from every stream."""
    plan = PlanInputs.from_dataset(dataset)
    batch_size = plan.batch_size
    global_batch_size = batch_size * world.ranks_per_node * world.num_nodes
    positions = [plan.stream_positions(epoch, stream_id, 1, world, 1) for stream_id in range(plan.num_streams)]
    slots = _stratified_slots(plan, global_batch_size)

    parts = []
    for stream_id, (stream_positions, count) in enumerate(zip(positions, slots.tolist())):
        in_order = _traversal_order(stream_positions)
        padding = (-len(in_order)) % count
        rows = np.concatenate([in_order, np.full(padding, -1, np.int64)]).reshape(-1, count)
        if _count_full(rows) != len(rows):
            logger.warning(
                "Because of the `stratified` batching method, some batches with an inadequate number of samples "
                "from stream with index %d are being dropped.",
                stream_id,
            )
        parts.append(rows)
    num_batches = min(_count_full(rows) for rows in parts)
    global_batches = np.concatenate([rows[:num_batches] for rows in parts], axis=1)
    return _finish(global_batches, world, batch_size, sample_in_epoch, "stratified")


def generate_work_per_stream_batching(
    dataset: Any, world: World, epoch: int, sample_in_epoch: int
) -> NDArray[np.int64]:
    """``per_stream`` batching: global batches of one stream each, streams mixed at random."""
    plan = PlanInputs.from_dataset(dataset)
    batch_size = plan.batch_size
    global_batch_size = batch_size * world.ranks_per_node * world.num_nodes
    batches, counts = [], []
    for stream_id in range(plan.num_streams):
        positions = plan.stream_positions(epoch, stream_id, world.num_nodes, world, batch_size)
        rows = _traversal_order(positions).reshape(-1, global_batch_size)
        full = _count_full(rows)
        if full == 0:
            logger.warning(
                "Stream with index %d does not have an adequate number of samples to construct a complete "
                "global batch. Training will occur without any samples from this stream (global batch size %d).",
                stream_id,
                global_batch_size,
            )
        elif full != len(rows):
            logger.warning(
                "Because of the `per_stream` batching method, some batches with an inadequate number of samples "
                "from stream with index %d will be dropped.",
                stream_id,
            )
        batches.append(rows[:full])
        counts.append(full)
    if not any(counts):
        raise ValueError(
            f"No stream has an adequate number of samples to construct a complete global batch. With "
            f"`per_stream` batching every global batch ({global_batch_size} samples) comes from one stream: "
            f"lower the batch size or add samples."
        )

    seed = plan.shuffle_seed + epoch if plan.epoch_seed_change else plan.shuffle_seed
    picks = _interleave_origins(np.random.default_rng(seed), counts)
    global_batches = np.concatenate(batches)[picks]
    return _finish(global_batches, world, batch_size, sample_in_epoch, "per_stream")


def generate_work_device_per_stream_batching(
    dataset: Any, world: World, epoch: int, sample_in_epoch: int
) -> NDArray[np.int64]:
    """``device_per_stream`` batching: whole device batches of one stream, per node at random.

    Streams are partitioned over ``num_canonical_nodes`` nodes (which must be a multiple of the
    physical nodes); each physical node interleaves the device batches of its canonical nodes.
    """
    plan = PlanInputs.from_dataset(dataset)
    canonical, physical = plan.num_canonical_nodes, world.num_nodes
    if canonical % physical:
        raise ValueError(
            f"For `device_per_stream` batching, num_canonical_nodes must be divisible by physical nodes. "
            f"Got {canonical} canonical nodes and {physical} physical nodes."
        )
    batch_size = plan.batch_size
    positions = [plan.stream_positions(epoch, stream_id, canonical, world, 1) for stream_id in range(plan.num_streams)]

    per_node = canonical // physical
    node_batches, node_counts = [], []
    for node in range(physical):
        batches, counts = [], []
        for stream_id, stream_positions in enumerate(positions):
            in_order = _traversal_order(stream_positions[node * per_node : (node + 1) * per_node])
            padding = batch_size - len(in_order) % batch_size
            rows = np.concatenate([in_order, np.full(padding, -1, np.int64)]).reshape(-1, batch_size)
            full = _count_full(rows)
            if full == 0:
                logger.warning(
                    "Stream with index %d does not have an adequate number of samples to construct even a single "
                    "device batch of size %d on node %d. Training will occur without any samples from this "
                    "stream on that node.",
                    stream_id,
                    batch_size,
                    node,
                )
            elif full != len(rows):
                logger.warning(
                    "Because of the `device_per_stream` batching method, some batches with an inadequate number "
                    "of samples from stream with index %d will be dropped.",
                    stream_id,
                )
            batches.append(rows[:full])
            counts.append(full)
        if not any(counts):
            raise ValueError(
                f"No stream has an adequate number of samples to construct a single device batch of size "
                f"{batch_size} on node {node}. With `device_per_stream` batching every device batch comes from "
                f"one stream: lower the batch size or add samples."
            )
        node_batches.append(np.concatenate(batches))
        node_counts.append(counts)

    num_devices = physical * world.ranks_per_node
    rows_per_node = max(len(rows) for rows in node_batches)
    rows_per_node += num_devices - rows_per_node % num_devices
    seed = plan.shuffle_seed + epoch if plan.epoch_seed_change else plan.shuffle_seed
    rng = np.random.default_rng(seed)
    for node in range(physical):
        ordered = node_batches[node][_interleave_origins(rng, node_counts[node])]
        filler = np.full((rows_per_node - len(ordered), batch_size), -1, np.int64)
        node_batches[node] = np.concatenate([ordered, filler])
    device_batches = np.stack(node_batches, axis=1).reshape(-1, batch_size)
    global_batches = device_batches.reshape(-1, batch_size * num_devices)
    return _finish(global_batches, world, batch_size, sample_in_epoch, "device_per_stream")


batching_methods: dict[str, WorkFn] = {
    "random": generate_work_random_batching,
    "stratified": generate_work_stratified_batching,
    "per_stream": generate_work_per_stream_batching,
    "device_per_stream": generate_work_device_per_stream_batching,
}


def generate_work(
    batching_method: str, dataset: Any, world: World, epoch: int, sample_in_epoch: int
) -> NDArray[np.int64]:
    """Build the whole epoch's plan for every node, rank and worker.

    Args:
        batching_method: ``random``, ``stratified``, ``per_stream`` or ``device_per_stream``.
        dataset: A `PlanInputs`, or any object exposing its attributes (see
            `PlanInputs.from_dataset`), e.g. a StreamingDataset.
        world: The world to plan for (its nodes, ranks per node and workers per rank).
        epoch: Epoch number.
        sample_in_epoch: Samples of this epoch already consumed (across all ranks).

    Returns:
        C-contiguous int64 array (nodes, ranks per node, workers per rank, batches per worker,
        batch size) of global sample ids, -1 where there is none.
    """
    method = batching_methods.get(batching_method)
    if method is None:
        raise ValueError(
            f"Invalid batching method: {batching_method}. Must be one of `random`, `stratified`, `per_stream`, or "
            f"`device_per_stream`."
        )
    plan = PlanInputs.from_dataset(dataset)
    # Sized before anything is allocated: an index declaring billions of samples is refused, not built.
    nodes = max(world.num_nodes, plan.initial_physical_nodes or 1)
    check_plan_memory(
        plan.epoch_size,
        world.num_workers,
        plan.batch_size,
        num_canonical_nodes=plan.num_canonical_nodes,
        num_physical_nodes=nodes,
    )
    return np.ascontiguousarray(method(dataset, world, epoch, sample_in_epoch))
