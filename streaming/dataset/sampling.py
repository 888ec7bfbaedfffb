"""Per-shard sampling: how many samples each shard contributes when a stream is up/down-sampled.

Whole multiples of the stream are spread evenly (every shard repeated the same number of times).
The fractional rest is drawn in "picks" of ``granularity`` consecutive samples from one shard,
taken in a seeded random order (upstream ``streaming.base.sampling.get_sampling``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _check_non_negative(name: str, value: int) -> None:
    if value < 0:
        raise ValueError(f"`{name}` must be a non-negative integer, but got: {value}.")


def get_sampling(
    samples_per_shard: ArrayLike, choose: int, granularity: int, seed: int, epoch: int, use_epoch: bool
) -> NDArray[np.int64]:
    """Return how many samples to draw from each shard so that ``choose`` are drawn in total.

    Args:
        samples_per_shard: Size of each shard of the stream.
        choose: Samples to draw from the whole stream.
        granularity: Size of a pick (the last pick of a shard may be smaller).
        seed: Seed of the pick order.
        epoch: Epoch, added to the seed when ``use_epoch``.
        use_epoch: Whether the pick order changes every epoch.
    """
    _check_non_negative("choose", choose)
    if granularity <= 0:
        raise ValueError(f"`granularity` must be a positive integer, but got: {granularity}.")
    _check_non_negative("seed", seed)
    _check_non_negative("epoch", epoch)

    sizes = np.asarray(samples_per_shard, dtype=np.int64).reshape(-1)
    total = int(sizes.sum())
    if total == 0:
        return np.zeros_like(sizes)
    full_repeats, remainder = divmod(int(choose), total)
    if not remainder:
        return sizes * full_repeats

    picks_per_shard = (sizes + granularity - 1) // granularity
    pick_shard = np.repeat(np.arange(len(sizes)), picks_per_shard)
    pick_size = np.full(len(pick_shard), granularity, np.int64)
    # Each shard's last pick holds what is left. An empty shard has no picks, so its index points
    # at the previous shard's last pick (or, for the first shard, the very last pick) and
    # overwrites that size with `granularity`; upstream does the same, later shards winning.
    pick_size[np.cumsum(picks_per_shard) - 1] = sizes - (picks_per_shard - 1) * granularity

    order = np.random.default_rng(seed + epoch if use_epoch else seed).permutation(len(pick_shard))
    ordered_sizes = pick_size[order]
    taken_before = np.cumsum(ordered_sizes) - ordered_sizes
    taken = np.clip(remainder - taken_before, 0, ordered_sizes)
    extra = np.bincount(pick_shard[order], weights=taken, minlength=len(sizes))
    return sizes * full_repeats + extra.astype(np.int64)
