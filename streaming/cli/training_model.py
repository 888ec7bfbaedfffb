"""Play one epoch of a training run on paper: the real epoch plan, a model of downloads and steps.

The plan is the one `StreamingDataset` iterates: `streaming.dataset.batching.generate_work` on the same
`PlanInputs` (partition, shuffle, batching, weights), so which sample — hence which shard — every node, rank,
worker and batch reads is exact, and so are the bytes each node downloads (each shard a node needs, once;
no `cache_limit`, so nothing is evicted and fetched again).

Time is modelled, with these assumptions:

* ranks step together (a global step takes `step_time` once every rank has its batch); a rank's DataLoader
  takes batches from its workers in turn, so global step `s` is batch `s // W` of worker `s % W`;
* a worker asks for a shard when its iteration is `predownload` samples before the shard's first sample, or
  earlier, once it reaches the shard `PREPARED_AHEAD_PER_THREAD * PREPARE_THREADS` places before it in its order
  of first use (its prefetch keeps its threads busy past `predownload`), and a worker runs `prefetch_factor`
  batches ahead of training (PyTorch's default 2);
* a node's downloads share its link: the active downloads split `bandwidth` equally (at most
  `threads * workers` at once, in order of request), each after a fixed `latency`;
* a worker reads its batches one after another, each as soon as it has room for it (`prefetch_factor` batches
  not yet taken by training) and its shards are ready, for `read_time` of its own CPU (a worker per core):
  with batch reads (`StreamingDataLoader` with torch's default collate) a fixed cost per batch plus a small one
  per sample (the gather), else a cost per sample (a dict per sample, then collation);
* a step waits for every shard its batches need on every node, and for its batch to be read (that wait is a
  stall).

From the timeline: time to first batch, stalled steps, throughput over the run, the cache a node needs at the
peak (raw + compressed bytes of shards downloaded and not yet finished with), and shuffle quality.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streaming.dataset.batching import PlanInputs, default_predownload, generate_work
from streaming.dataset.partition import default_num_canonical_nodes
from streaming.dataset.shard_cache import PREPARE_THREADS, PREPARED_AHEAD_PER_THREAD
from streaming.dataset.shuffle import default_shuffle_block_size
from streaming.dataset.weighting import StreamWeight, resolve_weights
from streaming.dataset.world import World
from streaming.format.index import shard_files, stored_files


@dataclass(frozen=True)
class Shards:
    """The shards of a dataset as the simulation needs them."""

    samples: np.ndarray  # samples per shard
    stored_bytes: np.ndarray  # bytes downloaded per shard (the compressed file when compressed)
    cache_bytes: np.ndarray  # bytes a shard takes in the cache while prepared (raw + compressed)
    index_bytes: int = 0

    @classmethod
    def from_index(cls, shards: list[dict[str, Any]], index_bytes: int) -> Shards:
        def stored(shard: dict[str, Any]) -> int:
            return sum(info["bytes"] for info in stored_files(shard))

        def cached(shard: dict[str, Any]) -> int:  # raw and compressed files, as a prepared shard keeps them
            return sum(info["bytes"] for _, info in shard_files(shard))

        return cls(
            np.array([s["samples"] for s in shards], np.int64),
            np.array([stored(s) for s in shards], np.int64),
            np.array([cached(s) for s in shards], np.int64),
            index_bytes,
        )

    @classmethod
    def uniform(cls, count: int, samples: int, size: int) -> Shards:
        return cls(np.full(count, samples, np.int64), np.full(count, size, np.int64), np.full(count, size, np.int64))


@dataclass(frozen=True)
class Settings:
    """The run: topology, StreamingDataset settings, and the machine's speeds."""

    nodes: int = 1
    ranks_per_node: int = 1
    workers_per_rank: int = 1
    batch_size: int = 32
    shuffle: bool = False
    shuffle_algo: str = "py1e"
    shuffle_seed: int = 9176
    shuffle_block_size: int | None = None
    num_canonical_nodes: int | None = None
    partition_algo: str = "relaxed"
    batching_method: str = "random"
    sampling_method: str = "balanced"
    sampling_granularity: int = 1
    epoch_size: int | None = None
    predownload: int | None = None
    prefetch_factor: int = 2
    bandwidth: float = 100e6  # bytes per second per node
    latency: float = 0.0  # seconds before each download's first byte
    step_time: float = 0.1  # seconds per training step
    epoch: int = 0
    # How a worker reads a batch: batch reads (True) or one sample at a time (a custom collate_fn or a dataset
    # overriding __getitem__/get_item), and the CPU seconds that costs (measured here: benchmarks/tabular_bench.py,
    # loader_handover.py; 100 float32 features per sample).
    batch_reads: bool = True
    batch_read_time: float = 60e-6  # per batch, batch reads
    row_read_time: float = 0.3e-6  # per sample, batch reads
    sample_read_time: float = 6e-6  # per sample, one sample at a time

    def read_time(self, samples: int) -> float:
        """CPU seconds a worker spends reading (and collating) a batch of ``samples``."""
        if self.batch_reads:
            return self.batch_read_time + self.row_read_time * samples
        return self.sample_read_time * samples


@dataclass
class Result:
    """What one simulated epoch predicts."""

    steps: int
    samples: int
    bytes_per_node: list[int]
    shards_per_node: list[int]
    time_to_first_batch: float
    total_time: float
    stalled_steps: int
    stall_time: float
    read_stalled_steps: int
    min_cache_limit: int
    cache_limit_floor: int
    shuffle_quality: float
    shard_diversity: float
    random_diversity: float
    step_start: np.ndarray = field(repr=False)
    step_samples: np.ndarray = field(repr=False)
    downloads: list[tuple[np.ndarray, np.ndarray]] = field(repr=False)  # per node: (finish times, bytes)
    cache_curve: list[tuple[np.ndarray, np.ndarray]] = field(repr=False)  # per node: (step starts, bytes held)

    def summary(self) -> dict[str, Any]:
        throughput = self.samples / self.total_time if self.total_time else None
        return {
            "steps": self.steps,
            "samples": self.samples,
            "bytes_downloaded_per_node": self.bytes_per_node,
            "shards_downloaded_per_node": self.shards_per_node,
            "time_to_first_batch_s": round(self.time_to_first_batch, 4),
            "epoch_time_s": round(self.total_time, 3),
            "throughput_samples_per_s": round(throughput, 2) if throughput else None,
            "stalled_steps": self.stalled_steps,
            "stall_time_s": round(self.stall_time, 3),
            "steps_waiting_for_reads": self.read_stalled_steps,
            "min_cache_limit_bytes": self.min_cache_limit,
            "cache_limit_floor_bytes": self.cache_limit_floor,
            "shuffle_quality": round(self.shuffle_quality, 4),
            "distinct_shards_per_batch": round(self.shard_diversity, 3),
            "distinct_shards_per_batch_if_random": round(self.random_diversity, 3),
        }


def plan_inputs(shards: Shards, settings: Settings) -> PlanInputs:
    """The `PlanInputs` a StreamingDataset with these settings builds (one stream)."""
    total = int(shards.samples.sum())
    weights = resolve_weights([StreamWeight()], [total], settings.epoch_size, settings.shuffle_seed)
    ncn = settings.num_canonical_nodes or default_num_canonical_nodes(settings.shuffle_algo, settings.nodes)
    return PlanInputs(
        shards.samples,
        np.array([len(shards.samples)], np.int64),
        weights.choose,
        weights.proportion,
        weights.epoch_size,
        settings.batch_size,
        ncn,
        settings.partition_algo,
        settings.shuffle,
        settings.shuffle_algo,
        settings.shuffle_seed,
        settings.shuffle_block_size or default_shuffle_block_size(ncn),
        settings.sampling_method,
        settings.sampling_granularity,
        None,
        settings.batching_method,
    )


def epoch_plan(shards: Shards, settings: Settings) -> np.ndarray:
    """Sample ids of shape (nodes, ranks per node, workers per rank, batches per worker, batch size)."""
    world = World(settings.nodes, settings.ranks_per_node, settings.workers_per_rank, 0)
    return generate_work(settings.batching_method, plan_inputs(shards, settings), world, settings.epoch, 0)


class SharedLink:
    """Downloads of one node sharing its bandwidth equally (processor sharing), at most `slots` at once."""

    def __init__(self, bandwidth: float, latency: float, slots: int) -> None:
        self.bandwidth = bandwidth
        self.latency = latency
        self.slots = max(1, slots)
        self.clock = 0.0
        self.waiting: list[tuple[float, int, int, float]] = []  # (requested at, order, shard, bytes)
        self.active: dict[int, float] = {}  # shard -> bytes left
        self.done: dict[int, float] = {}

    def request(self, at: float, shard: int, size: float) -> None:
        self.waiting.append(
            (at + self.latency, len(self.waiting) + len(self.active) + len(self.done), shard, float(size))
        )

    def finish_time(self, needed: set[int]) -> float:
        """Advance until every shard in `needed` is downloaded; return when the last one finished."""
        while not needed <= self.done.keys():
            self._admit()
            if not self.active:
                if not self.waiting:
                    raise RuntimeError(f"shards {sorted(needed - self.done.keys())} were never requested")
                self.clock = max(self.clock, min(entry[0] for entry in self.waiting))
                continue
            rate = self.bandwidth / len(self.active)
            shard, left = min(self.active.items(), key=lambda item: item[1])
            next_arrival = min((entry[0] for entry in self.waiting if entry[0] > self.clock), default=math.inf)
            finish = self.clock + left / rate
            if len(self.active) < self.slots and next_arrival < finish:
                self._advance(next_arrival - self.clock, rate)
                continue
            self._advance(finish - self.clock, rate)
            self.active[shard] = 0.0
            for name in [s for s, rest in self.active.items() if rest <= 1e-3]:
                del self.active[name]
                self.done[name] = self.clock
        return max(self.done[s] for s in needed) if needed else self.clock

    def _admit(self) -> None:
        self.waiting.sort()
        while self.waiting and len(self.active) < self.slots and self.waiting[0][0] <= self.clock:
            _, _, shard, size = self.waiting.pop(0)
            self.active[shard] = size

    def _advance(self, seconds: float, rate: float) -> None:
        for shard in self.active:
            self.active[shard] -= seconds * rate
        self.clock += seconds


def simulate(
    shards: Shards,
    settings: Settings,
    progress: Callable[[int], object] | None = None,
    work: np.ndarray | None = None,
) -> Result:
    """Play the epoch (see the module docstring); `progress` is called with 1 after each simulated step.

    `work` is the epoch plan when the caller already built it (`epoch_plan(shards, settings)`).
    """
    work = epoch_plan(shards, settings) if work is None else work
    nodes, ranks, workers, batches, batch = work.shape
    offsets = np.concatenate([[0], np.cumsum(shards.samples)[:-1]])
    shard_of = np.where(work >= 0, np.searchsorted(offsets, np.maximum(work, 0), "right") - 1, -1)
    predownload = default_predownload(settings.batch_size) if settings.predownload is None else settings.predownload
    most_ahead = PREPARED_AHEAD_PER_THREAD * PREPARE_THREADS
    steps = workers * batches
    # requests[node][gate step] -> (position in its worker's list, worker, shard) first asked for then, in the
    # order the workers ask; needs[node][step] -> shards that step reads
    requests: list[dict[int, list[tuple[int, int, int]]]] = [{} for _ in range(nodes)]
    needs: list[list[set[int]]] = [[set() for _ in range(steps)] for _ in range(nodes)]
    last_use = np.full((nodes, len(shards.samples)), -1, np.int64)
    for node in range(nodes):
        asked: dict[int, tuple[int, int, int]] = {}
        for rank in range(ranks):
            for worker in range(workers):
                flat = shard_of[node, rank, worker].reshape(-1)
                valid = np.flatnonzero(flat >= 0)
                ids, first = np.unique(flat[valid], return_index=True)
                in_order = sorted(zip(valid[first].tolist(), ids.tolist()))
                for number, (position, shard) in enumerate(in_order):
                    asked_at = max(position - predownload, 0)
                    if number >= most_ahead:
                        asked_at = min(asked_at, in_order[number - most_ahead][0])
                    else:
                        asked_at = 0
                    batch_at = asked_at // batch
                    gate = max(batch_at - settings.prefetch_factor, 0) * workers + worker
                    asked[shard] = min(asked.get(shard, (gate, position, worker)), (gate, position, worker))
                for number in range(batches):
                    row = shard_of[node, rank, worker, number]
                    used = set(row[row >= 0].tolist())
                    step = number * workers + worker
                    needs[node][step] |= used
                    for shard in used:
                        last_use[node, shard] = max(last_use[node, shard], step)
        for shard, (gate, position, worker) in asked.items():
            requests[node].setdefault(gate, []).append((position, worker, shard))
    links = [SharedLink(settings.bandwidth, settings.latency, PREPARE_THREADS * workers * ranks) for _ in range(nodes)]
    index_time = (shards.index_bytes / settings.bandwidth + settings.latency) if shards.index_bytes else 0.0
    start = np.zeros(steps)
    end_previous = index_time
    stalled, stall_time, read_stalled = 0, 0.0, 0
    worker_free = np.full(workers, index_time)  # when each worker (of every rank alike) finishes its last read
    batch_sizes = (shard_of >= 0).sum(axis=4).max(axis=(0, 1))  # (workers, batches): samples per batch
    for step in range(steps):
        shards_ready = index_time
        for node, link in enumerate(links):
            for _, _, shard in sorted(requests[node].get(step, [])):
                link.request(end_previous, shard, shards.stored_bytes[shard])
            shards_ready = max(shards_ready, link.finish_time(needs[node][step]))
        ready = max(end_previous, shards_ready)
        worker, number = step % workers, step // workers
        # The worker reads this batch once the previous one is read, there is room for it (the step of the batch
        # prefetch_factor before it has started) and its shards are there.
        room = start[step - settings.prefetch_factor * workers] if number >= settings.prefetch_factor else index_time
        read = max(worker_free[worker], room, shards_ready) + settings.read_time(int(batch_sizes[worker, number]))
        worker_free[worker] = read
        if read > ready + 1e-9:
            ready = read
            read_stalled += step > 0
        if ready > end_previous + 1e-9 and step > 0:
            stalled += 1
            stall_time += ready - end_previous
        start[step] = ready
        end_previous = ready + settings.step_time
        if progress is not None:
            progress(1)
    samples_per_step = np.array([(shard_of[:, :, s % workers, s // workers] >= 0).sum() for s in range(steps)])
    downloads, caches, peaks = [], [], []
    for node, link in enumerate(links):
        names = sorted(link.done, key=lambda shard: link.done[shard])
        downloads.append((np.array([link.done[n] for n in names]), shards.stored_bytes[names]))
        held = np.zeros(steps)
        for shard in names:  # held from the first step that starts after its download, to its last use
            held_from = int(np.searchsorted(start, link.done[shard] - 1e-9, "left"))
            held[held_from : last_use[node, shard] + 1] += shards.cache_bytes[shard]
        caches.append((start.copy(), held))
        peaks.append(int(held.max(initial=0)))
    distinct, expected = _shuffle_quality(shard_of, shards.samples)
    return Result(
        steps=steps,
        samples=int(samples_per_step.sum()),
        bytes_per_node=[int(shards.stored_bytes[list(link.done)].sum()) + shards.index_bytes for link in links],
        shards_per_node=[len(link.done) for link in links],
        time_to_first_batch=float(start[0]) if steps else 0.0,
        total_time=float(end_previous),
        stalled_steps=stalled,
        stall_time=stall_time,
        read_stalled_steps=read_stalled,
        min_cache_limit=max(peaks, default=0),
        cache_limit_floor=4 * int(shards.cache_bytes.max(initial=0)),
        shuffle_quality=(distinct - 1) / (expected - 1) if expected > 1 else 1.0,
        shard_diversity=distinct,
        random_diversity=expected,
        step_start=start,
        step_samples=samples_per_step,
        downloads=downloads,
        cache_curve=caches,
    )


def _shuffle_quality(shard_of: np.ndarray, samples: np.ndarray) -> tuple[float, float]:
    """Mean distinct shards per device batch, and its expectation if every batch were a uniform random draw.

    Quality is `(observed - 1) / (random - 1)`: 0 when each batch comes from one shard, 1 as mixed as random.
    """
    rows = shard_of.reshape(-1, shard_of.shape[-1])
    counts = [len(np.unique(row[row >= 0])) for row in rows if (row >= 0).any()]
    batch = shard_of.shape[-1]
    share = samples / samples.sum()
    expected = float(np.sum(1 - (1 - share) ** batch))
    return (float(np.mean(counts)) if counts else 0.0), expected
