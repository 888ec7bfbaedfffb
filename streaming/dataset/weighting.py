"""Stream weighting and per-epoch resampling, as free functions over plain numbers and arrays.

Each stream has at most one of ``proportion`` (relative: its share of the epoch), ``repeat``
(absolute: a multiple of its size) or ``choose`` (absolute: an exact sample count). Relative and
absolute weights cannot be mixed. `resolve_weights` turns them into samples per stream per epoch;
`resample_streams` then picks the concrete samples of one epoch (upstream `Stream.apply_weights`
and `StreamingDataset.resample_streams`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streaming.dataset.sampling import get_sampling

SAMPLING_METHODS = ("balanced", "fixed")


@dataclass(frozen=True)
class StreamWeight:
    """The weight given to one stream; at most one field is set, each must be non-negative."""

    proportion: float | None = None
    repeat: float | None = None
    choose: int | None = None

    def __post_init__(self) -> None:
        given = {name: value for name, value in self.__dict__.items() if value is not None}
        if len(given) > 1:
            raise ValueError(
                f"At most one of `proportion`, `repeat`, and `choose` may be specified; got {sorted(given)}."
            )
        for name, value in given.items():
            if value < 0:
                raise ValueError(f"`{name}` must be non-negative, got {value}.")

    @property
    def is_relative(self) -> bool:
        """Whether this stream is weighted by ``proportion``."""
        return self.proportion is not None

    @property
    def is_unspecified(self) -> bool:
        """Whether no weight was given."""
        return self.proportion is None and self.repeat is None and self.choose is None


@dataclass(frozen=True, eq=False)
class ResolvedWeights:
    """Every stream's weight in all three forms, as arrays in stream order."""

    proportion: NDArray[np.float64]
    repeat: NDArray[np.float64]
    choose: NDArray[np.int64]

    @property
    def epoch_size(self) -> int:
        """Samples per epoch over all streams."""
        return int(self.choose.sum())


def validate_weights(weights: Sequence[StreamWeight]) -> tuple[bool, bool]:
    """Return ``(relative, unspecified)``: whether proportions are used, whether nothing is set.

    Raises ValueError naming the first stream that mixes relative and absolute weighting.
    """
    if not weights:
        raise ValueError("At least one stream is needed.")
    relative = weights[0].is_relative
    for stream_id, weight in enumerate(weights):
        if weight.is_relative != relative:
            raise ValueError(
                f"Relative (`proportion`) and absolute (`repeat`, `choose`, none) "
                f"stream weights cannot be mixed (stream {stream_id} differs from "
                f"stream 0)."
            )
    return relative, all(weight.is_unspecified for weight in weights)


def _split_by_proportion(proportions: NDArray[np.float64], choose_per_epoch: int, seed: int) -> NDArray[np.int64]:
    """Floor ``choose_per_epoch * proportion``; give the shortfall to randomly chosen streams."""
    proportions = proportions / proportions.sum()
    choose = (choose_per_epoch * proportions).astype(np.int64)
    shortfall = choose_per_epoch - int(choose.sum())
    lucky = np.random.default_rng(seed).choice(len(proportions), shortfall, replace=False)
    choose[lucky] += 1
    return choose


def resolve_weights(
    weights: Sequence[StreamWeight], samples_per_stream: ArrayLike, choose_per_epoch: int | None, seed: int
) -> ResolvedWeights:
    """Derive every stream's proportion, repeat and choose for one epoch.

    Args:
        weights: One weight per stream.
        samples_per_stream: Underlying samples of each stream.
        choose_per_epoch: The dataset's ``epoch_size`` (None or 0: not given). Only allowed with
            relative or unspecified weights; unspecified weights then mean "in proportion to size".
        seed: Seed for handing out the rounding shortfall (the dataset's ``shuffle_seed``).
    """
    sizes = np.asarray(samples_per_stream, dtype=np.int64).reshape(-1)
    if len(sizes) != len(weights):
        raise ValueError(f"Got {len(weights)} stream weights but {len(sizes)} stream sizes.")
    relative, unspecified = validate_weights(weights)
    with np.errstate(divide="ignore", invalid="ignore"):
        if relative:
            proportions = np.array([weight.proportion for weight in weights], np.float64)
            choose = _split_by_proportion(proportions, choose_per_epoch or int(sizes.sum()), seed)
            proportion = proportions / proportions.sum()
        elif unspecified and choose_per_epoch:
            choose = _split_by_proportion(sizes.astype(np.float64), choose_per_epoch, seed)
            proportion = sizes / sizes.sum()
        else:
            if choose_per_epoch:
                raise ValueError(
                    "`epoch_size` can only be given when streams are weighted relatively (`proportion`) or not at all."
                )
            choose = np.array([_absolute_choose(weight, int(size)) for weight, size in zip(weights, sizes)], np.int64)
            proportion = choose / choose.sum()
        return ResolvedWeights(proportion, choose / sizes, choose)


def _absolute_choose(weight: StreamWeight, size: int) -> int:
    if weight.repeat is not None:
        return int(weight.repeat * size)
    if weight.choose is not None:
        return int(weight.choose)
    return size


def apply_weights(
    weights: Sequence[StreamWeight], samples_per_stream: ArrayLike, choose_per_epoch: int | None, seed: int
) -> int:
    """Return the epoch size implied by the weights (`resolve_weights` gives each stream's)."""
    return resolve_weights(weights, samples_per_stream, choose_per_epoch, seed).epoch_size


def resample_streams(
    samples_per_shard: ArrayLike,
    shards_per_stream: ArrayLike,
    choose_per_stream: ArrayLike,
    seed: int,
    epoch: int,
    sampling_method: str = "balanced",
    sampling_granularity: int = 1,
    shuffle: bool = False,
    stream_id: int | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Pick one epoch's samples: the shuffle units and the sample id at each epoch position.

    Each shard contributes ``choose // size`` full copies of itself (one shuffle unit each) and,
    for the remainder, one unit of sorted randomly chosen samples. With ``balanced`` sampling the
    samples of a partial shard change every epoch, and so (only when shuffling) does the choice
    of which shards are partial; ``fixed`` sampling keeps both.

    Args:
        samples_per_shard: Size of every shard of every stream, streams in order.
        shards_per_stream: Number of shards of each stream.
        choose_per_stream: Samples per epoch of each stream (`ResolvedWeights.choose`).
        seed: The dataset's ``shuffle_seed``.
        epoch: Epoch number.
        sampling_method: ``balanced`` or ``fixed``.
        sampling_granularity: Pick size for the fractional part of a stream's choose.
        shuffle: Whether the dataset shuffles.
        stream_id: Resample only this stream (its ids stay global); None for all streams.

    Returns:
        ``(shuffle_units, sample_ids)``: int64 unit sizes, and the global sample id of every
        position of the epoch (``len == sum(choose)`` over the streams resampled).
    """
    if sampling_method not in SAMPLING_METHODS:
        raise ValueError(f"Unknown sampling_method {sampling_method!r}; choose one of {list(SAMPLING_METHODS)}.")
    shard_sizes = np.asarray(samples_per_shard, dtype=np.int64).reshape(-1)
    counts = np.asarray(shards_per_stream, dtype=np.int64).reshape(-1)
    stream_choose = np.asarray(choose_per_stream, dtype=np.int64).reshape(-1)
    shard_begins = np.cumsum(counts) - counts
    sample_offsets = np.cumsum(shard_sizes) - shard_sizes
    balanced = sampling_method == "balanced"
    picks_change = balanced and shuffle

    streams = range(len(counts)) if stream_id is None else [stream_id]
    shard_ids = np.concatenate([np.arange(shard_begins[s], shard_begins[s] + counts[s]) for s in streams]).astype(
        np.int64
    )
    choose = np.concatenate(
        [
            get_sampling(
                shard_sizes[shard_begins[s] : shard_begins[s] + counts[s]],
                int(stream_choose[s]),
                sampling_granularity,
                seed,
                epoch,
                picks_change,
            )
            for s in streams
        ]
    ).astype(np.int64)
    sizes = shard_sizes[shard_ids]
    offsets = sample_offsets[shard_ids]
    nonempty = sizes > 0
    full = np.where(nonempty, choose // np.maximum(sizes, 1), 0)
    partial = np.where(nonempty, choose % np.maximum(sizes, 1), 0)

    units_per_shard = full + (partial > 0)
    unit_shard = np.repeat(np.arange(len(sizes)), units_per_shard)
    units = sizes[unit_shard]
    partial_units = (np.cumsum(units_per_shard) - 1)[partial > 0]
    units[partial_units] = partial[partial > 0]
    unit_starts = np.cumsum(units) - units
    sample_ids = np.arange(int(units.sum()), dtype=np.int64) + np.repeat(offsets[unit_shard] - unit_starts, units)

    rng = np.random.default_rng(seed + epoch if balanced else seed)
    for unit, shard in zip(partial_units.tolist(), np.flatnonzero(partial).tolist()):
        picked = rng.choice(int(sizes[shard]), int(partial[shard]), replace=False)
        picked.sort()
        start = int(unit_starts[unit])
        sample_ids[start : start + len(picked)] = picked + offsets[shard]
    return units, sample_ids
