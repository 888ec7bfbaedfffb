"""Shuffle algorithms: one epoch's permutation of sample ids, aware of shards and canonical nodes.

Every function takes the sizes of the shuffle units (shards, or pieces of resampled shards) in
order and returns ``ids`` with ``ids[position] = sample id``. The results are bit-identical to
MosaicML Streaming: numpy ``Generator`` methods are called in the same order with the same
arguments. Two facts make the vectorised bookkeeping here equivalent to upstream's lists:

* ``Generator.shuffle`` draws the same numbers for a list and for an ndarray of the same length,
  so shuffling an index array stands in for shuffling a list of spans or shard objects;
* cutting the unit sequence at the canonical-node boundaries (``total * (c+1) // C``) is computed
  with ``searchsorted`` instead of a walk; a unit crossing a boundary is split, its head staying
  in the earlier node, and empty units go to the first node whose boundary is at or after them.

Algorithms: ``naive`` (global permutation), ``py1s`` and ``py2s`` (shuffle shards, then samples
within each shard), ``py1br`` (shuffle within randomly sized, staggered blocks) and ``py1e``
(default; each shard's samples are spread over a window around the shard's position).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streaming.dataset.errors import UnknownAlgorithmError
from streaming.dataset.shift_order import MERGE_SAMPLES, ShiftedOrder
from streaming.format.distinct import distinct

ShuffleFn = Callable[[ArrayLike, int, int, int, int], NDArray[np.int64]]

DEFAULT_BLOCK_SIZE = 1 << 18


def default_shuffle_block_size(num_canonical_nodes: int) -> int:
    """Upstream's default ``shuffle_block_size``: ``max(4_000_000 // ncn, 1 << 18)``."""
    return max(4_000_000 // num_canonical_nodes, DEFAULT_BLOCK_SIZE)


def _as_sizes(shard_sizes: ArrayLike) -> NDArray[np.int64]:
    sizes = np.asarray(shard_sizes, dtype=np.int64).reshape(-1)
    if (sizes < 0).any():
        raise ValueError(
            f"Shuffle unit sizes must be non-negative, got {sizes.min()} at index {int(np.argmin(sizes))}."
        )
    return sizes


def _concat_ranges(begins: NDArray[np.int64], sizes: NDArray[np.int64]) -> NDArray[np.int64]:
    """Concatenate ``arange(b, b + s)`` for every pair, without a Python loop."""
    total = int(sizes.sum())
    starts = np.cumsum(sizes) - sizes
    # Position k of the output lies in range i at k - starts[i]: adding begins[i] - starts[i] (repeated over
    # range i) to 0..total-1 gives begins[i] + (k - starts[i]) everywhere at once.
    return np.arange(total, dtype=np.int64) + np.repeat(begins - starts, sizes)


def _shuffle_segments(
    rng: np.random.Generator, values: NDArray[np.int64], offsets: NDArray[np.int64], sizes: NDArray[np.int64]
) -> None:
    """Shuffle ``values[o:o+s]`` in place per segment, in order (segments under 2 draw nothing)."""
    keep = sizes > 1
    # A Python loop on purpose: the reference draws from one generator segment by segment, and identical
    # orders need the same draws in the same sequence (a vectorised permutation would draw differently).
    for offset, size in zip(offsets[keep].tolist(), sizes[keep].tolist()):
        rng.shuffle(values[offset : offset + size])


def _split_into_parts(
    sizes: NDArray[np.int64], total: int, num_parts: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Cut a sequence of units into ``num_parts`` consecutive parts of ``total*(c+1)//C`` ends.

    Returns ``(unit, offset, size, part_edges)``: for every piece, the index of its unit in
    ``sizes``, its offset inside that unit and its size; and the ``num_parts + 1`` edges of each
    part in the piece list.
    """
    ends = np.cumsum(sizes)
    starts = ends - sizes
    bounds = total * np.arange(1, num_parts + 1, dtype=np.int64) // num_parts
    cuts = distinct(bounds)
    # A unit is cut by every boundary strictly inside it: those between first_cut and end_cut. Its pieces are
    # one more than its cuts; the rest enumerates pieces with np.repeat instead of a loop over units.
    first_cut = np.searchsorted(cuts, starts, side="right")
    end_cut = np.searchsorted(cuts, ends, side="left")
    pieces_per_unit = np.maximum(end_cut - first_cut, 0) + 1
    num_pieces = int(pieces_per_unit.sum())

    unit = np.repeat(np.arange(len(sizes), dtype=np.int64), pieces_per_unit)
    first_piece = np.cumsum(pieces_per_unit) - pieces_per_unit
    nth = np.arange(num_pieces, dtype=np.int64) - first_piece[unit]
    is_first = nth == 0
    is_last = nth == pieces_per_unit[unit] - 1
    last_cut = len(cuts) - 1
    cut_before = cuts[np.clip(first_cut[unit] + nth - 1, 0, last_cut)]
    cut_after = cuts[np.clip(first_cut[unit] + nth, 0, last_cut)]
    piece_start = np.where(is_first, starts[unit], cut_before)
    piece_end = np.where(is_last, ends[unit], cut_after)

    # A piece belongs to the part whose boundary it ends at or before; parts are consecutive in the piece list.
    part = np.searchsorted(bounds, piece_end, side="left")
    part_edges = np.searchsorted(part, np.arange(num_parts + 1), side="left")
    return unit, piece_start - starts[unit], piece_end - piece_start, part_edges


def divide_spans(
    spans: Sequence[tuple[int, int]], num_samples: int, num_parts: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Cut ordered ``(begin, end)`` sample spans at canonical-node boundaries.

    Returns the cut spans and, per part, the ``(first, end)`` indices of its spans in that list
    (upstream ``streaming.base.shuffle.py1s.divide_spans``).
    """
    pairs = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    begins = pairs[:, 0]
    unit, offset, size, edges = _split_into_parts(pairs[:, 1] - begins, num_samples, num_parts)
    piece_begins = begins[unit] + offset
    out_spans = list(zip(piece_begins.tolist(), (piece_begins + size).tolist()))
    return out_spans, list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def canonical_spans(
    shard_sizes: ArrayLike, num_canonical_nodes: int, seed: int, epoch: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], np.random.Generator]:
    """Steps shared by py1s, py1br and py1e.

    Shuffle the unit order once per run, cut it at canonical-node boundaries, then shuffle the
    pieces within each canonical node for this epoch. Returns the pieces' first sample ids and
    sizes in final order, the canonical-node edges in that piece list, and the epoch generator
    (which the caller keeps drawing from).
    """
    sizes = _as_sizes(shard_sizes)
    begins = np.cumsum(sizes) - sizes
    order = np.arange(len(sizes), dtype=np.int64)
    np.random.default_rng(seed).shuffle(order)
    unit, offset, piece_sizes, edges = _split_into_parts(sizes[order], int(sizes.sum()), num_canonical_nodes)
    piece_begins = begins[order][unit] + offset

    epoch_rng = np.random.default_rng(seed + epoch)
    piece_order = np.arange(len(piece_begins), dtype=np.int64)
    for part_begin, part_end in zip(edges[:-1].tolist(), edges[1:].tolist()):
        epoch_rng.shuffle(piece_order[part_begin:part_end])
    return piece_begins[piece_order], piece_sizes[piece_order], edges, epoch_rng


def get_shuffle_naive(
    shard_sizes: ArrayLike, num_canonical_nodes: int, seed: int, epoch: int, block_size: int = DEFAULT_BLOCK_SIZE
) -> NDArray[np.int64]:
    """Permute all samples at once, ignoring shards and nodes (``default_rng(seed+epoch)``)."""
    total = int(_as_sizes(shard_sizes).sum())
    return np.random.default_rng(seed + epoch).permutation(total).astype(np.int64, copy=False)


def get_shuffle_py1s(
    shard_sizes: ArrayLike, num_canonical_nodes: int, seed: int, epoch: int, block_size: int = DEFAULT_BLOCK_SIZE
) -> NDArray[np.int64]:
    """Shuffle shard order within each canonical node, then samples within each shard piece."""
    begins, sizes, _, epoch_rng = canonical_spans(shard_sizes, num_canonical_nodes, seed, epoch)
    ids = _concat_ranges(begins, sizes)
    _shuffle_segments(epoch_rng, ids, np.cumsum(sizes) - sizes, sizes)
    return ids


def get_shuffle_py2s(
    shard_sizes: ArrayLike, num_canonical_nodes: int, seed: int, epoch: int, block_size: int = DEFAULT_BLOCK_SIZE
) -> NDArray[np.int64]:
    """Shuffle shards and their samples once per run, then again per canonical node per epoch."""
    sizes = _as_sizes(shard_sizes)
    fixed_rng = np.random.default_rng(seed)
    order = np.arange(len(sizes), dtype=np.int64)
    fixed_rng.shuffle(order)
    ordered_sizes = sizes[order]
    layout_offsets = np.cumsum(ordered_sizes) - ordered_sizes
    samples = _concat_ranges((np.cumsum(sizes) - sizes)[order], ordered_sizes)
    _shuffle_segments(fixed_rng, samples, layout_offsets, ordered_sizes)

    unit, offset, piece_sizes, edges = _split_into_parts(ordered_sizes, int(sizes.sum()), num_canonical_nodes)
    piece_offsets = layout_offsets[unit] + offset
    epoch_rng = np.random.default_rng(seed + epoch)
    piece_order = np.arange(len(piece_sizes), dtype=np.int64)
    for part_begin, part_end in zip(edges[:-1].tolist(), edges[1:].tolist()):
        part = piece_order[part_begin:part_end]
        epoch_rng.shuffle(part)
        _shuffle_segments(epoch_rng, samples, piece_offsets[part], piece_sizes[part])
    return samples[_concat_ranges(piece_offsets[piece_order], piece_sizes[piece_order])]


def get_shuffle_py1br(
    shard_sizes: ArrayLike, num_canonical_nodes: int, seed: int, epoch: int, block_size: int = DEFAULT_BLOCK_SIZE
) -> NDArray[np.int64]:
    """Lay out each node's shard pieces, then shuffle within staggered blocks of random size.

    Block sizes are drawn from ``[0.75 * block_size, 1.25 * block_size)``; each node's blocks are
    shifted back by a per-node stagger drawn from ``[0, 0.75 * block_size)``.
    """
    begins, sizes, edges, epoch_rng = canonical_spans(shard_sizes, num_canonical_nodes, seed, epoch)
    ids = _concat_ranges(begins, sizes)
    node_ends = np.concatenate([[0], np.cumsum(sizes)])[edges[1:]].tolist()
    low, high = int(0.75 * block_size), int(1.25 * block_size)
    staggers = epoch_rng.integers(0, low, num_canonical_nodes).tolist()

    node_start = 0
    for node_stop, stagger in zip(node_ends, staggers):
        blocks = []
        blocks_end = node_start
        while blocks_end < node_stop:
            drawn = int(epoch_rng.integers(low, high))
            block_start = max(blocks_end - stagger, node_start)
            block_stop = min(blocks_end + drawn - stagger, node_stop)
            blocks.append((block_start, block_stop))
            blocks_end += block_stop - block_start
        for block_start, block_stop in blocks:
            epoch_rng.shuffle(ids[block_start:block_stop])
        node_start = node_stop
    return ids


def get_shuffle_py1e(
    shard_sizes: ArrayLike, num_canonical_nodes: int, seed: int, epoch: int, block_size: int = DEFAULT_BLOCK_SIZE
) -> NDArray[np.int64]:
    """Spread each shard piece's samples over a window of about ``block_size`` positions.

    Per canonical node: shuffle each piece's samples, then move every sample by a uniform offset
    bounded by half of (a random block size in ``[0.75, 1.25) * block_size`` minus the piece
    size), clipped to the node, and sort by the new positions.
    """
    begins, sizes, edges, epoch_rng = canonical_spans(shard_sizes, num_canonical_nodes, seed, epoch)
    low, high = int(0.75 * block_size), int(1.25 * block_size)
    # Each node's order is kept apart and joined at the end: one node (the default on one physical node) is then
    # the result itself, not a copy of it into an epoch-sized array allocated beforehand.
    node_orders: list[NDArray[np.int64]] = []
    piece_larger_than_block = False
    for node, (part_begin, part_end) in enumerate(zip(edges[:-1].tolist(), edges[1:].tolist())):
        node_sizes = sizes[part_begin:part_end]
        num_node_samples = int(node_sizes.sum())
        if num_node_samples == 0:
            raise ValueError(
                f"The number of samples assigned to a canonical node is 0. This very likely indicates that the "
                f"number of samples in this stream is less than the number of canonical nodes, which is "
                f"{num_canonical_nodes}. Please check your index.json file and ensure that your dataset has been "
                f"written out correctly. If this was intended, reduce num_canonical_nodes (canonical node {node}, "
                f"{int(sizes.sum())} samples)."
            )
        node_samples = _concat_ranges(begins[part_begin:part_end], node_sizes)
        offsets = np.cumsum(node_sizes) - node_sizes
        _shuffle_segments(epoch_rng, node_samples, offsets, node_sizes)

        # Each piece's shifts are added into the positions as they are drawn: collecting them first held two
        # more float64 arrays of the node's size at the peak of building a plan.
        draw_block, draw_shifts = epoch_rng.integers, epoch_rng.uniform
        positions = np.arange(num_node_samples, dtype=np.float64)
        for offset, size in zip(offsets.tolist(), node_sizes.tolist()):
            cutoff = (int(draw_block(low, high)) - size) / 2
            if cutoff < 0:
                cutoff = 0.0
                piece_larger_than_block = True
            lower = max(-cutoff, -offset)
            upper = min(cutoff, num_node_samples - offset - size)
            positions[offset : offset + size] += draw_shifts(lower, upper, size)
        order = np.argsort(positions)
        del positions
        node_orders.append(node_samples[order])
        del order, node_samples

    if piece_larger_than_block:
        warnings.warn(
            "Shuffle block size was smaller than shard size for some shards. This will result in these shards "
            "not being shuffled with other shards. Set shuffle_block_size to a larger value for a higher quality "
            "shuffle.",
            stacklevel=2,
        )
    return node_orders[0] if len(node_orders) == 1 else np.concatenate(node_orders)


shuffle_algos: dict[str, ShuffleFn] = {
    "naive": get_shuffle_naive,
    "py1br": get_shuffle_py1br,
    "py1e": get_shuffle_py1e,
    "py1s": get_shuffle_py1s,
    "py2s": get_shuffle_py2s,
}


def get_shuffle(
    algo: str,
    shard_sizes: ArrayLike,
    num_canonical_nodes: int,
    seed: int,
    epoch: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> NDArray[np.int64]:
    """Return the epoch's sample order: ``ids[position] = sample id``.

    Args:
        algo: One of ``naive``, ``py1br``, ``py1e``, ``py1s``, ``py2s``.
        shard_sizes: Samples in each shuffle unit, in sample-id order.
        num_canonical_nodes: Canonical nodes; the set of samples per node is fixed across epochs.
        seed: Run seed; ``seed + epoch`` seeds the per-epoch randomness.
        epoch: Epoch number.
        block_size: Shuffle window for ``py1br`` and ``py1e`` (ignored by the others).
    """
    shuffle = shuffle_algos.get(algo)
    if shuffle is None:
        raise UnknownAlgorithmError(f"Unknown shuffle_algo {algo!r}; choose one of {sorted(shuffle_algos)}.")
    return shuffle(shard_sizes, num_canonical_nodes, seed, epoch, block_size)


def stream_py1e(
    shard_sizes: ArrayLike,
    seed: int,
    epoch: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
    merge_samples: int = MERGE_SAMPLES,
    states: NDArray[np.uint64] | None = None,
) -> ShiftedOrder:
    """`get_shuffle_py1e`'s order for one canonical node, produced a window at a time as it is iterated
    (`shift_order.ShiftedOrder`: memory bounded by the window, not the epoch); ``states`` are those of an
    earlier call with the same arguments, which spare the shuffles."""
    begins, sizes, _, epoch_rng = canonical_spans(shard_sizes, 1, seed, epoch)
    return ShiftedOrder(epoch_rng, begins, sizes, int(0.75 * block_size), int(1.25 * block_size), merge_samples, states)
