"""`streamed_share`: a reader's share of an epoch computed as it is read, for plans no other reader shares.

A plan is normally built whole once per node and shared through a file by its readers (`batching`). A reader
alone on its node gains nothing from the file and pays the whole epoch before its first sample; a plan too
large for memory cannot be built at all. For the common layout (one node, one canonical node, ``random``
batching, every sample once; ``py1e``, ``py1s``, ``py1br`` or no shuffle) the positions a reader gets are plain
arithmetic on the epoch order, and that order can be produced a window at a time (`shift_order` for ``py1e``,
`block_order` for ``py1s`` and ``py1br``), so `StreamedShare` yields the reader's sample ids as it is read,
holding a window of the order instead of the epoch. The ids are those of `batching.generate_work`, position for
position (``tests/order/test_streamed_share.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from streaming.dataset.batching import PlanInputs
from streaming.dataset.block_order import OrderChunks, py1br_chunks, py1s_chunks
from streaming.dataset.shift_order import STATE_EVERY
from streaming.dataset.shuffle import canonical_spans, stream_py1e
from streaming.dataset.world import World

#: ``InstanceState.shared_file``: the path of a node's shared file, built by the first caller with the builder.
SharedFile = Callable[[str, Callable[[str], None]], str]

#: Ids of the unshuffled order handed over at once.
_IN_ORDER_CHUNK = 1 << 20


def _in_order(num_samples: int, skip_to: int) -> OrderChunks:
    for start in range(skip_to, num_samples, _IN_ORDER_CHUNK):
        yield start, np.arange(start, min(start + _IN_ORDER_CHUNK, num_samples), dtype=np.int64)


class StreamedShare:
    """One reader's run of the plan (sample ids, -1 for padding), sliced forward only: ``share[a:b]``.

    Args:
        order: the epoch order (the sample id at each position) as consecutive chunks from at most
            ``drop_first`` on.
        num_samples: positions in the epoch.
        drop_first: positions already consumed (``sample_in_epoch``).
        world: the reader's place; one node and one canonical node.
        batch_size: per-device batch size.
    """

    def __init__(self, order: OrderChunks, num_samples: int, drop_first: int, world: World, batch_size: int) -> None:
        self._order = order
        self._ranks, self._rank = world.ranks_per_node, world.rank_of_node
        self._workers, self._worker = world.workers_per_rank, world.worker_of_rank
        self._batch = batch_size
        self._first = drop_first
        remaining = num_samples - drop_first
        self._remaining = remaining
        # As `partition.get_partitions_orig` pads a node's positions to a multiple of its ranks: with the
        # positions ending ``ranks - 1`` before the last repeated (the caller keeps remaining >= 2 * ranks).
        missing = (-remaining) % self._ranks
        self._repeat_from = drop_first + remaining - self._ranks + 1 - missing
        self._per_rank = (remaining + missing) // self._ranks
        rounds = -(-self._per_rank // (self._workers * batch_size))
        self._length = rounds * batch_size
        self._window = np.zeros(0, np.int64)
        self._window_start = 0  # epoch position of self._window[0]
        self._read_to = 0

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, at: slice) -> NDArray[np.int64]:
        start, stop, step = at.indices(self._length)
        if step != 1 or start < self._read_to:
            raise IndexError(f"A streamed share is read forward in slices; got {at} after entry {self._read_to}.")
        self._read_to = stop
        entries = np.arange(start, stop, dtype=np.int64)
        batch, within = np.divmod(entries, self._batch)
        of_rank = (batch * self._workers + self._worker) * self._batch + within
        real = of_rank < self._per_rank
        of_node = of_rank[real] * self._ranks + self._rank
        positions = np.where(
            of_node < self._remaining, self._first + of_node, self._repeat_from + of_node - self._remaining
        )
        ids = np.full(len(entries), -1, np.int64)
        if len(positions):
            ids[real] = self._ids_at(positions)
        return ids

    def _ids_at(self, positions: NDArray[np.int64]) -> NDArray[np.int64]:
        """The order's ids at ``positions`` (ascending but for the repeated tail), keeping what later reads need."""
        needed_to = int(positions.max()) + 1
        # Later reads start after these positions, except the repeated tail near the end of the epoch.
        keep_from = min(int(positions.min()), self._repeat_from)
        parts = [self._window]
        start = self._window_start
        have_to = start + len(self._window)
        while have_to < needed_to:
            chunk_start, chunk = next(self._order)
            if chunk_start != have_to:  # the order's first chunk, after the positions it skipped
                parts, start, have_to = [], chunk_start, chunk_start
            parts.append(chunk)
            have_to += len(chunk)
            # Chunks wholly before what is needed go as they come: a share resumed deep in the epoch holds a
            # window of the order, never the order up to its position.
            while len(parts) > 1 and start + len(parts[0]) <= keep_from:
                start += len(parts.pop(0))
        window = np.concatenate(parts) if len(parts) > 1 else parts[0]
        ids = window[positions - start]
        drop = max(0, keep_from - start)
        self._window = window[drop:].copy() if drop else window
        self._window_start = start + drop
        return ids


#: The shuffle algorithms whose order of one canonical node is produced a window at a time.
_STREAMED_SHUFFLES = ("py1e", "py1s", "py1br")


def computes_layout(plan: PlanInputs, num_nodes: int, ranks_per_node: int, sample_in_epoch: int) -> bool:
    """Whether `streamed_share` computes this epoch's shares (else the plan is built whole): one node and one
    canonical node, `random` batching over every sample once, and ``py1e``, ``py1s``, ``py1br`` or no shuffle."""
    # Samples of each stream (a stream may have no shards): differences of the running total at its bounds.
    shard_bounds = np.concatenate([[0], np.cumsum(plan.shards_per_stream)])
    running = np.concatenate([[0], np.cumsum(plan.samples_per_shard)])
    totals = running[shard_bounds[1:]] - running[shard_bounds[:-1]]
    every_sample_once = len(plan.samples_per_shard) > 0 and np.array_equal(plan.choose_per_stream, totals)
    num_samples = int(running[-1])
    block = plan.shuffle_block_size or 0
    return bool(
        plan.batching_method == "random"
        and every_sample_once
        and num_samples == plan.epoch_size
        and num_nodes == 1
        and plan.num_canonical_nodes == 1
        and plan.partition_algo in ("orig", "relaxed")
        and num_samples - sample_in_epoch >= 2 * ranks_per_node
        and (not plan.shuffle or plan.shuffle_algo in _STREAMED_SHUFFLES)
        # A piece larger than the smallest block makes the reference's py1e warn before the epoch starts.
        and (not plan.shuffle or plan.shuffle_algo != "py1e" or int(plan.samples_per_shard.max()) <= int(0.75 * block))
    )


def streamed_share(
    plan: PlanInputs, world: World, epoch: int, sample_in_epoch: int, shared_file: SharedFile | None = None
) -> StreamedShare | None:
    """This reader's share of the epoch as a `StreamedShare`, or None when the plan's layout is not one it
    computes (the caller then builds the plan whole).

    ``shared_file`` (`InstanceState.shared_file`) shares the ``py1e`` shuffles' generator states among the
    node's readers: the first to ask draws them, the others read them (none when there is one reader).
    """
    if not computes_layout(plan, world.num_nodes, world.ranks_per_node, sample_in_epoch):
        return None
    num_samples = int(plan.samples_per_shard.sum())
    block = plan.shuffle_block_size or 0
    order: OrderChunks
    if not plan.shuffle:
        order = _in_order(num_samples, sample_in_epoch)
    elif plan.shuffle_algo == "py1s":
        begins, sizes, _, rng = canonical_spans(plan.samples_per_shard, 1, plan.shuffle_seed, epoch)
        order = py1s_chunks(rng, begins, sizes, sample_in_epoch)
    elif plan.shuffle_algo == "py1br":
        begins, sizes, _, rng = canonical_spans(plan.samples_per_shard, 1, plan.shuffle_seed, epoch)
        order = py1br_chunks(rng, begins, sizes, int(0.75 * block), int(1.25 * block), sample_in_epoch)
    elif shared_file is None:
        order = stream_py1e(plan.samples_per_shard, plan.shuffle_seed, epoch, block).chunks(sample_in_epoch)
    else:

        def draw(path: str) -> None:
            with open(path, "wb") as out:
                np.save(out, stream_py1e(plan.samples_per_shard, plan.shuffle_seed, epoch, block).states)

        # Named by every input of the states (the dataset instance fixes the shards).
        states = np.load(shared_file(f"py1e-states-e{epoch}-seed{plan.shuffle_seed}-b{block}-g{STATE_EVERY}.npy", draw))
        shifted = stream_py1e(plan.samples_per_shard, plan.shuffle_seed, epoch, block, states=states)
        order = shifted.chunks(sample_in_epoch)
    return StreamedShare(order, num_samples, sample_in_epoch, world, plan.batch_size)
