"""Partitioning: which epoch position each node, rank and worker reads, batch by batch.

The result of every function here has shape ``(physical nodes, ranks per node, workers per rank,
batches per worker, batch size)`` and holds positions in the (shuffled) epoch, padded with -1.
The global order is elastically deterministic: for a fixed ``num_canonical_nodes`` and global
batch size, the sequence of global batches does not depend on the number of nodes, ranks or
workers (upstream ``streaming.base.partition``; algorithms ``orig`` and ``relaxed``).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from streaming.dataset.errors import UnknownAlgorithmError

logger = logging.getLogger(__name__)

PartitionFn = Callable[..., NDArray[np.int64]]

_SHARD_SHUFFLES_PER_NODE = 64


def default_num_canonical_nodes(shuffle_algo: str, num_physical_nodes: int) -> int:
    """Upstream's default ``num_canonical_nodes``: 64 per node for py1s/py2s, else 1 per node."""
    if shuffle_algo in ("py1s", "py2s"):
        return _SHARD_SHUFFLES_PER_NODE * num_physical_nodes
    return num_physical_nodes


def _check_node_ratio(num_canonical_nodes: int, num_physical_nodes: int) -> None:
    smaller = min(num_canonical_nodes, num_physical_nodes)
    larger = max(num_canonical_nodes, num_physical_nodes)
    if smaller < 1:
        raise ValueError(
            f"num_canonical_nodes ({num_canonical_nodes}) and num_physical_nodes "
            f"({num_physical_nodes}) must be positive."
        )
    if larger % smaller:
        raise ValueError(
            f"Either canonical or physical nodes must be evenly divisible by the other, otherwise striping "
            f"slices of shards over nodes may lead to each node downloading all shards "
            f"(num_canonical_nodes={num_canonical_nodes}, num_physical_nodes={num_physical_nodes})."
        )


def _canonical_grid(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int) -> NDArray[np.int64]:
    """Lay the epoch out as one row of consecutive positions per canonical node.

    Rows are as long as the longest canonical node; shorter rows repeat their last position. With
    more physical than canonical nodes, rows are padded (by repeating earlier columns) to a
    multiple of the node ratio so every physical node gets the same count.
    """
    if num_samples <= 0:
        raise ValueError(f"Cannot partition an epoch of {num_samples} samples.")
    rows = num_canonical_nodes
    row_len = -(-num_samples // rows)
    ratio = num_physical_nodes // rows if rows < num_physical_nodes else 0
    padding = (-row_len) % ratio if ratio else 0
    width = row_len + padding

    if num_samples > rows or (num_samples == rows and rows >= num_physical_nodes):
        starts = np.arange(rows, dtype=np.int64) * num_samples // rows
        stops = np.arange(1, rows + 1, dtype=np.int64) * num_samples // rows
        # Row i is starts[i], starts[i] + 1, ... built by broadcasting; a row one short of row_len (the split
        # leaves rows of two lengths) repeats its last position, which the boolean subtraction does in place.
        grid = starts[:, None] + np.arange(width, dtype=np.int64)
        grid[:, row_len - 1] -= stops - starts < row_len
        if padding:
            # Columns counted from the end, exactly as upstream slices them (negative indices).
            grid[:, -padding:] = grid[:, -2 * padding - ratio + 1 : -padding - ratio + 1]
        return grid

    warnings.warn(
        f"Trying to partition {num_samples} samples over {rows} canonical nodes. This will result in many "
        f"samples being repeated, and depending on your batching method, batches being completely dropped. "
        f"Check if your dataset has the expected number of samples, and consider decreasing the number of "
        f"canonical nodes.",
        stacklevel=2,
    )
    return np.resize(np.arange(num_samples, dtype=np.int64), (rows, width))


def _pad_for_ranks(ids: NDArray[np.int64], ranks_per_node: int) -> NDArray[np.int64]:
    """Append columns to ``(nodes, samples)`` so each node's samples split evenly over its ranks."""
    per_node = ids.shape[1]
    overflow = per_node % ranks_per_node
    if not overflow:
        return ids
    missing = ranks_per_node - overflow
    if ranks_per_node + missing - 1 <= per_node:
        stop = per_node - ranks_per_node + 1
        extra = ids[:, stop - missing : stop]
    else:
        warnings.warn(
            f"Attempting to partition {per_node} samples per physical node over {ranks_per_node} gpus. This "
            f"will result in many samples being repeated, and depending on your batching method, batches "
            f"being completely dropped. Check if your dataset has the expected number of samples.",
            stacklevel=2,
        )
        extra = np.concatenate([np.tile(ids, missing // per_node), ids[:, : missing % per_node]], axis=1)
    return np.concatenate([ids, extra], axis=1)


def get_partitions_orig(
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int | None = None,
    drop_first: int = 0,
    initial_physical_nodes: int | None = None,
) -> NDArray[np.int64]:
    """Partition with canonical and physical node counts that divide one another.

    Canonical nodes are interleaved sample by sample, the first ``drop_first`` (rounded down to
    a multiple of the physical nodes) are skipped, physical node ``p`` takes every P-th of the
    rest, rank ``r`` every R-th of its node's, and a rank's batches go round-robin to workers.
    ``initial_physical_nodes`` is accepted for signature compatibility and ignored.
    """
    _check_node_ratio(num_canonical_nodes, num_physical_nodes)
    batch_size = batch_size or 1
    if drop_first % num_physical_nodes:
        logger.warning(
            "`drop_first` was not divisible by `num_physical_nodes`. Rounding it down to make it divisible "
            "(drop_first %d, num_physical_nodes %d).",
            drop_first,
            num_physical_nodes,
        )
        drop_first -= drop_first % num_physical_nodes

    grid = _canonical_grid(num_samples, num_canonical_nodes, num_physical_nodes)
    # Reading the grid column by column interleaves the canonical nodes; dealing that stream out P at a time
    # and transposing gives each physical node every P-th sample, all without a Python loop.
    per_node = grid.T.reshape(-1)[drop_first:].reshape(-1, num_physical_nodes).T
    per_node = _pad_for_ranks(per_node, ranks_per_node)
    per_rank = per_node.reshape(num_physical_nodes, -1, ranks_per_node)

    samples_per_rank = per_rank.shape[1]
    unit = workers_per_rank * batch_size
    padding = math.ceil(samples_per_rank / unit) * unit - samples_per_rank
    if padding:
        filler = np.full((num_physical_nodes, padding, ranks_per_node), -1, np.int64)
        per_rank = np.concatenate([per_rank, filler], axis=1)

    # (node, rank, batch, worker, sample) then swap batch and worker: batches go to workers round-robin,
    # which is how torch's DataLoader consumes them.
    per_batch = per_rank.transpose(0, 2, 1).reshape(
        num_physical_nodes, ranks_per_node, -1, workers_per_rank, batch_size
    )
    return per_batch.transpose(0, 1, 3, 2, 4)


def get_partitions_relaxed(
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int | None = None,
    drop_first: int = 0,
    initial_physical_nodes: int | None = None,
) -> NDArray[np.int64]:
    """Like ``orig``, but resumable on a node count that does not divide ``num_canonical_nodes``.

    When resuming on such a count, the epoch is partitioned for ``initial_physical_nodes`` with
    the same global batch size, read in traversal order and dealt out again over the new world.
    The global batch size must then be divisible by the initial number of devices.
    """
    physical = num_physical_nodes
    canonical = num_canonical_nodes
    compatible = (physical <= canonical and canonical % physical == 0) or (
        physical > canonical and physical % canonical == 0
    )
    if initial_physical_nodes is None or compatible:
        return get_partitions_orig(
            num_samples, canonical, physical, ranks_per_node, workers_per_rank, batch_size, drop_first
        )

    batch_size = batch_size or 1
    global_batch_size = physical * ranks_per_node * batch_size
    initial_devices = initial_physical_nodes * ranks_per_node
    if global_batch_size % initial_devices:
        raise ValueError(
            f"A global batch size of {global_batch_size} is not evenly divisible by the initial total number "
            f"of devices of {initial_devices}. Make sure that when using the `relaxed` partitioning algorithm, "
            f"the global batch size does not change during resumption of training."
        )
    initial = get_partitions_orig(
        num_samples,
        canonical,
        initial_physical_nodes,
        ranks_per_node,
        workers_per_rank,
        global_batch_size // initial_devices,
        drop_first,
    )
    in_order = initial.transpose(3, 2, 0, 1, 4).reshape(-1)
    dealt = in_order.reshape(-1, workers_per_rank, physical, ranks_per_node, batch_size)
    return dealt.transpose(2, 3, 1, 0, 4)


partition_algos: dict[str, PartitionFn] = {
    "orig": get_partitions_orig,
    "relaxed": get_partitions_relaxed,
}


def get_partitions(
    algo: str,
    num_samples: int,
    num_canonical_nodes: int,
    num_physical_nodes: int,
    ranks_per_node: int,
    workers_per_rank: int,
    batch_size: int | None = None,
    drop_first: int = 0,
    initial_physical_nodes: int | None = None,
) -> NDArray[np.int64]:
    """Partition ``num_samples`` epoch positions over nodes, ranks, workers and batches.

    Args:
        algo: ``orig`` or ``relaxed``.
        num_samples: Epoch size.
        num_canonical_nodes: Canonical nodes (fixed for the whole run).
        num_physical_nodes: Physical nodes now.
        ranks_per_node: Ranks per node.
        workers_per_rank: DataLoader workers per rank.
        batch_size: Per-device batch size (None means 1).
        drop_first: Positions already consumed this epoch (for resumption).
        initial_physical_nodes: Physical nodes of the run being resumed, if any.

    Returns:
        int64 array of shape (nodes, ranks per node, workers per rank, batches per worker,
        batch size), -1 where there is no sample.
    """
    world_size = ranks_per_node * num_physical_nodes
    repeated = world_size - num_samples % world_size
    if num_samples + repeated < drop_first:
        raise ValueError(f"Resuming further into the dataset ({drop_first}) than it has samples ({num_samples})")
    partition = partition_algos.get(algo)
    if partition is None:
        raise UnknownAlgorithmError(f"Unknown partition_algo {algo!r}; choose one of {sorted(partition_algos)}.")
    return partition(
        num_samples,
        num_canonical_nodes,
        num_physical_nodes,
        ranks_per_node,
        workers_per_rank,
        batch_size,
        drop_first,
        initial_physical_nodes,
    )
