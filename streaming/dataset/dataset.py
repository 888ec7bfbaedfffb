"""`StreamingDataset`: deterministic, resumable iteration over one or more streams of shards.

The sample order is MosaicML Streaming's, bit for bit (same seed, algorithms and topology give the same
samples in the same order, so checkpoints move between the two). What differs is how the processes of a
node cooperate: there is no shared-memory registry and no barrier. Each DataLoader worker derives its epoch
from its own iteration counter, the epoch plan is built once per rank and shared through a file, shard
downloads are serialised by per-shard kernel locks, and everything a process holds dies with it (see
`streaming.dataset.coordination`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import mmap
import os
import warnings
import weakref
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

# torch seeds numpy.random in every DataLoader worker: imported here, before workers fork, its ~1 MiB is
# shared by them instead of being allocated anew in each.
import numpy.random
from torch.utils.data import IterableDataset, get_worker_info

from streaming.dataset.algorithms import warn_unknown_algorithms
from streaming.dataset.array import Array
from streaming.dataset.batching import PlanInputs, batching_methods, default_predownload, generate_work
from streaming.dataset.checkpoint_values import CheckpointBounds, checked_checkpoint
from streaming.dataset.checkpoint_version import checked_resume, version_entry
from streaming.dataset.coordination import InstanceState
from streaming.dataset.coordination.local_claims import LocalDirClaims
from streaming.dataset.delta_remote import holds_delta_table, holds_parquet_files
from streaming.dataset.delta_table_name import resolve_table_name
from streaming.dataset.errors import InvalidCheckpointError
from streaming.dataset.partition import default_num_canonical_nodes
from streaming.dataset.plan_memory import plan_is_small
from streaming.dataset.reader_pool import ReaderPool
from streaming.dataset.shard_cache import ShardCache
from streaming.dataset.share import Located, PlanRun, WorkerShare, first_needs
from streaming.dataset.shuffle import default_shuffle_block_size
from streaming.dataset.stream import Stream, StreamDefaults
from streaming.dataset.streamed_share import computes_layout, streamed_share
from streaming.dataset.weighting import SAMPLING_METHODS, resolve_weights
from streaming.dataset.world import World
from streaming.format.columns import Columns, columns_of
from streaming.format.dataset_version import dataset_version
from streaming.format.errors import ShardCorruptError
from streaming.format.index import dumps_index
from streaming.format.mds.gather import BatchRead, Segment
from streaming.format.mds.reader import MDSReader
from streaming.format.table import ShardTable
from streaming.util import bytes_to_int, number_abbrev_to_int

# Iteration unmaps the shard pages it has read every this many samples (`Reader.release_pages`): a process, and
# each DataLoader worker, then holds a few MiB of shard mappings instead of every byte read in the epoch.
RELEASE_PAGES_EVERY = 256
# Batch reads of samples smaller than a page scattered across their shards release them every this many
# batches (see `_iter_batch_reads`).
RELEASE_SCATTERED_BATCHES = 256
# A DataLoader worker's first iteration hands batches over by name from its third batch on when its share holds
# at least this many samples (`StreamingDataset._chunks`).
NAME_MID_EPOCH = 1 << 15


def _share_batches_by_name() -> None:
    """In a DataLoader worker, hand batches to the main process by shared-memory name, not by file descriptor.

    Passing one descriptor per batch through a socket bounds a DataLoader's throughput (by names: +20-40%
    per epoch here). The worker process exists only to serve this dataset, and the main process rebuilds each
    batch by whichever method the worker used, so the main process's own setting is left untouched. Naming
    needs torch's shared-memory manager, which takes ~0.2 s to start once per process, so the caller uses it
    from a dataset's second iteration on, or from the third batch of a long first one (`StreamingDataset._chunks`):
    the first batch (and a resumed run's) comes without that delay.
    Opt out with ``STREAMING_WORKER_SHARING=keep``.
    """
    if get_worker_info() is None or os.environ.get("STREAMING_WORKER_SHARING") == "keep":
        return
    import torch.multiprocessing

    if torch.multiprocessing.get_sharing_strategy() != "file_system":
        torch.multiprocessing.set_sharing_strategy("file_system")


def _shard_table(stream: Stream, world: World, allow_unsafe_types: bool) -> ShardTable:
    """A stream's shards: its index as is, or, when its class overrides upstream's ``Stream.get_shards`` hook
    (upstream's dataset builds its shard list by calling it: a subclass may filter or reorder the shards), the
    shards that override returns."""
    if type(stream).get_shards is Stream.get_shards:
        return stream.load_table()
    shards = stream.get_shards(world, allow_unsafe_types)
    entries = [shard.index_entry for shard in shards]
    if any(entry is None for entry in entries):
        raise TypeError(
            f"{type(stream).__name__}.get_shards returned shards without their index entries; return shards "
            f"that Stream.get_shards returned (all of them or a selection)."
        )
    index = dumps_index(cast(list[dict[str, Any]], entries)).encode()
    return ShardTable.from_bytes(index, f"{type(stream).__name__}.get_shards() of {stream!r}")


def overrides_item_access(cls: type[StreamingDataset]) -> bool:
    """Whether a dataset class reads samples its own way: it overrides ``__getitem__`` or ``get_item``."""
    overrides = _ITEM_ACCESS_OVERRIDDEN.get(cls)
    if overrides is None:
        overrides = _ITEM_ACCESS_OVERRIDDEN[cls] = (
            cls.__getitem__ is not StreamingDataset.__getitem__ or cls.get_item is not StreamingDataset.get_item
        )
    return overrides


#: A shard and the positions of a batch's samples in it (None: all of them, in order).
ShardGroup = tuple[int, np.ndarray | None]


def _by_shard(shard_ids: np.ndarray) -> list[ShardGroup]:
    """The shards of a batch's samples with their positions, in the order each shard is first needed."""
    first = shard_ids[0]
    if shard_ids[-1] == first and bool(np.all(shard_ids == first)):
        return [(int(first), None)]
    # A stable sort keeps each shard's positions rising; on 16-bit keys numpy sorts by radix, in linear time.
    keys = shard_ids.astype(np.uint16) if int(shard_ids.max()) < 1 << 16 else shard_ids
    order = np.argsort(keys, kind="stable")
    ordered = shard_ids[order]
    groups = np.split(order, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1)
    groups.sort(key=lambda group: int(group[0]))
    return [(int(shard_ids[group[0]]), group) for group in groups]


def _scattered(indices: np.ndarray, groups: list[ShardGroup]) -> bool:
    """Whether a batch's samples are spread over more than 4 times their number of samples of their shards."""
    span = 0
    for _, positions in groups:
        chosen = indices if positions is None else indices[positions]
        span += int(chosen.max()) - int(chosen.min()) + 1
    return span > 4 * len(indices)


#: `overrides_item_access` per class, decided once per class rather than once per epoch.
_ITEM_ACCESS_OVERRIDDEN: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


class StreamingDataset(Array, IterableDataset):
    """Iterate (and randomly access) samples of one or more streams, the same way on every rank and worker.

    Arguments, defaults and validation are MosaicML Streaming's; docs/guide/reading.md lists them. ``batch_size`` is
    required to iterate. ``__iter__`` yields this worker's samples of the next epoch (or the resumed one after
    ``load_state_dict``); ``dataset[i]`` reads any sample, downloading its shard when needed.
    """

    def __init__(
        self,
        *,
        streams: Sequence[Stream] | None = None,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        download_retry: int = 2,
        download_timeout: float = 60.0,
        validate_hash: str | None = None,
        keep_zip: bool = False,
        epoch_size: int | str | None = None,
        predownload: int | None = None,
        cache_limit: int | str | None = None,
        sampling_method: str = "balanced",
        sampling_granularity: int = 1,
        partition_algo: str = "relaxed",
        num_canonical_nodes: int | None = None,
        batch_size: int | None = None,
        shuffle: bool = False,
        shuffle_algo: str = "py1e",
        shuffle_seed: int = 9176,
        shuffle_block_size: int | None = None,
        batching_method: str = "random",
        allow_unsafe_types: bool = False,
        replication: int | None = None,
        stream_name: str = "stream",
        stream_config: dict[str, Any] | None = None,
    ) -> None:
        if bool(streams) == (remote is not None or local is not None):
            raise ValueError("You must provide either `streams` or `remote`/`local`, but not both.")
        if sampling_method not in SAMPLING_METHODS:
            raise ValueError(f"Invalid sampling method: {sampling_method}. Must be one of `balanced` or `fixed`.")
        if sampling_granularity <= 0:
            raise ValueError(f"`sampling_granularity` must be a positive integer, but got: {sampling_granularity}.")
        # Looked up when a partition or a shuffle is built, as upstream does: named here, refused there.
        warn_unknown_algorithms(shuffle, shuffle_algo, partition_algo)
        if batching_method not in batching_methods:
            raise ValueError(
                f"Invalid batching method: {batching_method}. Must be one of `random`, `stratified`, `per_stream`, "
                f"or `device_per_stream`."
            )
        if shuffle_seed < 0:
            raise ValueError(f"`shuffle_seed` must be a non-negative integer, but got: {shuffle_seed}.")
        # Upstream reads any false epoch_size (0, "") as no epoch_size.
        self.epoch_size_arg = number_abbrev_to_int(epoch_size) if epoch_size else None
        if self.epoch_size_arg is not None and self.epoch_size_arg < 0:
            raise ValueError(
                f"Epoch size cannot be negative. Received {self.epoch_size_arg} (epoch_size={epoch_size!r})."
            )

        self.sampling_method = sampling_method
        self.sampling_granularity = sampling_granularity
        self.partition_algo = partition_algo
        self.num_canonical_nodes = num_canonical_nodes
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.shuffle_algo = shuffle_algo
        self.shuffle_seed = shuffle_seed
        self.shuffle_block_size = shuffle_block_size
        self.batching_method = batching_method
        self.allow_unsafe_types = allow_unsafe_types
        self.replication = replication
        self.initial_physical_nodes: int | None = None
        self.predownload = default_predownload(batch_size) if predownload is None else predownload
        if batch_size is not None and self.predownload < batch_size:
            warnings.warn(
                f"predownload < batch_size ({self.predownload} < {batch_size}).This may result in slower batch "
                f"time. Recommendation is to set predownload to at-least batch_size.",
                stacklevel=2,
            )

        world = World.detect()
        self._unique_world = world
        self._parallel_world = world.replicate(replication) if replication is not None else world

        defaults = StreamDefaults(remote, local, split, download_retry, download_timeout, validate_hash, keep_zip)
        if streams:
            self.streams = list(streams)
            for stream in self.streams:
                stream.apply_default(defaults.as_dict())  # upstream's hook, which stream subclasses may override
        else:
            from streaming.dataset.registry import streams_registry

            config = {**(stream_config or {}), **defaults.as_dict()}
            self.streams = [streams_registry.get(stream_name)(**config)]
        self.num_streams = len(self.streams)
        # A remote that is a table name reads the table's location (streaming.dataset.delta_table_name); a plain
        # Stream whose remote is a Delta table's folder reads the table (streaming.dataset.delta_stream), one whose
        # remote is a folder of Parquet files without an index reads the files (streaming.dataset.parquet_stream).
        for stream in self.streams:
            resolve_table_name(stream)
            if type(stream) is Stream and holds_delta_table(stream):
                from streaming.dataset.delta_stream import DeltaStream

                DeltaStream.adopt(stream)
            elif type(stream) is Stream and holds_parquet_files(stream):
                from streaming.dataset.parquet_stream import ParquetStream

                ParquetStream.adopt(stream)
        self._reads_delta = any(hasattr(stream, "pin") for stream in self.streams)
        for stream_id, stream in enumerate(self.streams):
            if not (stream.remote or stream._local):
                raise ValueError(f"`remote` and/or `local` path must be provided (stream {stream_id} has neither).")
        locals_seen = [os.path.abspath(os.path.join(s.local, s.split)) for s in self.streams]
        if len(set(locals_seen)) != len(locals_seen):
            raise ValueError(
                f"Reused local directory: {locals_seen}. Provide a different one (streams must have distinct "
                f"local/split directories)."
            )
        # Claimed before any index is downloaded into them, so a cache of another remote is never read; held
        # for the dataset's life (the attribute is only kept, never read).
        self._local_claims: LocalDirClaims | None = LocalDirClaims(
            [(local_dir, s.remote_index_location()) for local_dir, s in zip(locals_seen, self.streams)]
        )

        self.cache_limit = None if cache_limit is None else bytes_to_int(cache_limit)
        self._set_up_shards([_shard_table(stream, world, allow_unsafe_types) for stream in self.streams])
        self._state = InstanceState()

    def _set_up_shards(self, tables: list[ShardTable]) -> None:
        """Everything the dataset derives from its streams' shard tables: sizes, offsets, readers, weights, the
        epoch size and the shard cache (again when a Delta stream is pinned to another version on resume)."""
        self.shards_per_stream = np.array([len(t) for t in tables], np.int64)
        self.shard_offset_per_stream = np.concatenate([[0], np.cumsum(self.shards_per_stream)[:-1]]).astype(np.int64)
        self.samples_per_shard = np.concatenate([t.samples for t in tables]) if tables else np.zeros(0, np.int64)
        self.num_shards = len(self.samples_per_shard)
        self.stream_per_shard = np.repeat(np.arange(self.num_streams), self.shards_per_stream)
        self.sample_offset_per_shard = np.concatenate([[0], np.cumsum(self.samples_per_shard)[:-1]]).astype(np.int64)
        self.samples_per_stream = np.array([t.num_samples for t in tables], np.int64)
        self.sample_offset_per_stream = np.concatenate([[0], np.cumsum(self.samples_per_stream)[:-1]]).astype(np.int64)
        self.num_samples = int(self.samples_per_shard.sum())
        for stream, stream_samples in zip(self.streams, self.samples_per_stream):
            if not stream_samples:
                index = os.path.join(stream.local, stream.split, "index.json")
                if hasattr(stream, "pin"):  # a Delta table: no index
                    index = f"the Delta table {stream.remote}, version {getattr(stream, 'version', None)}"
                raise RuntimeError(f"Stream contains no samples: {index}.")
        self._shard_starts = array("q", self.sample_offset_per_shard.tolist())
        self.readers = ReaderPool([(s.local, s.split) for s in self.streams], tables)
        self._shard_tables = tables
        self._version_seen: str | None | bool = False  # the dataset's version, False until first asked
        self.readers.validate(self.allow_unsafe_types)

        weights = resolve_weights(
            [s.weight for s in self.streams], self.samples_per_stream, self.epoch_size_arg, self.shuffle_seed
        )
        for stream, proportion, repeat, choose in zip(self.streams, weights.proportion, weights.repeat, weights.choose):
            stream.proportion, stream.repeat, stream.choose = float(proportion), float(repeat), int(choose)
        self._choose_per_stream = weights.choose
        self._proportion_per_stream = weights.proportion
        self.epoch_size = weights.epoch_size
        self.length = math.ceil(self.epoch_size / self._parallel_world.num_ranks)

        self._shard_cache = ShardCache(self.streams, tables, self.readers, self.cache_limit)

    # ------------------------------------------------------------------ sizes and settings

    def __len__(self) -> int:
        """Samples this rank yields per epoch (upstream: ``ceil(epoch_size / ranks)``)."""
        return self.length

    @property
    def size(self) -> int:
        """Underlying samples of all streams (what ``dataset[i]`` indexes)."""
        return self.num_samples

    @property
    def shards(self) -> ReaderPool:
        """Upstream's ``shards``: the reader of every shard by global shard id (built when first used)."""
        return self.readers

    @property
    def bytes_per_sample(self) -> float:
        """The shards' bytes per sample, from the index alone (nothing is read)."""
        stored = sum(int(table.raw_bytes.sum()) for table in self._shard_cache.tables)
        return stored / max(self.num_samples, 1)

    @property
    def next_epoch(self) -> int:
        iterations = self._state.iterations()
        return max(iterations) if iterations else 0

    @property
    def cache_usage(self) -> int:
        """Bytes the local cache holds (index files included) when ``cache_limit`` is set, else 0."""
        return self._shard_cache.usage

    def _plan_inputs(self) -> PlanInputs:
        ncn = self.num_canonical_nodes
        if not ncn:  # upstream takes 0 for "not given" too
            ncn = default_num_canonical_nodes(self.shuffle_algo, self._parallel_world.num_nodes)
        block = default_shuffle_block_size(ncn) if self.shuffle_block_size is None else self.shuffle_block_size
        if self.batch_size is None:
            raise ValueError(
                "Please pass `batch_size` to StreamingDataset. It should be set the same as the DataLoader, and is "
                "the number of samples per batch, for each device. It is necessary for deterministic resumption "
                "and optimal performance."
            )
        return PlanInputs(
            self.samples_per_shard,
            self.shards_per_stream,
            self._choose_per_stream,
            self._proportion_per_stream,
            self.epoch_size,
            self.batch_size,
            ncn,
            self.partition_algo,
            self.shuffle,
            self.shuffle_algo,
            self.shuffle_seed,
            block,
            self.sampling_method,
            self.sampling_granularity,
            self.initial_physical_nodes,
            self.batching_method,
        )

    def resample_streams(self, epoch: int, stream_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(shuffle_units, sample_ids)`` of an epoch (upstream's method of the same name)."""
        return self._plan_inputs().resample(epoch, stream_id)

    # ------------------------------------------------------------------ checkpoints

    def _dataset_version(self) -> str | None:
        """The fingerprint of a dataset kept by incremental runs, None for any other (computed once)."""
        if self._version_seen is False:
            self._version_seen = dataset_version(self._shard_tables)
        return cast("str | None", self._version_seen)

    def state_dict(self, num_samples: int, from_beginning: bool) -> dict[str, Any]:
        """Checkpoint of the position in the current epoch, with upstream's keys.

        A dataset that ``incremental_to_mds`` keeps adds one, ``dataset_version``
        (`streaming.dataset.checkpoint_version`), so a resume on another version of it is never silently shifted.

        Args:
            num_samples: samples consumed, across all ranks.
            from_beginning: whether ``num_samples`` counts from the start of the epoch, or from where this
                run resumed it.
        """
        epoch = self.next_epoch - 1
        offset = 0
        _, resumed = self._state.read_resume()
        if resumed is not None and resumed.get("epoch") == epoch:
            offset = int(resumed["sample_in_epoch"])
        ncn = self.num_canonical_nodes
        if not ncn:
            ncn = default_num_canonical_nodes(self.shuffle_algo, self._parallel_world.num_nodes)
        return {
            "epoch": epoch,
            "sample_in_epoch": num_samples if from_beginning else offset + num_samples,
            "num_canonical_nodes": ncn,
            "shuffle_seed": self.shuffle_seed,
            "initial_physical_nodes": self.initial_physical_nodes or self._parallel_world.num_nodes,
            **version_entry(self._dataset_version(), self.epoch_size),
            **self._delta_versions(),
        }

    def _delta_versions(self) -> dict[str, Any]:
        """The checkpoint key naming the pinned version of each Delta stream (none without Delta streams)."""
        if not self._reads_delta:
            return {}
        from streaming.dataset.delta_stream import versions_entry

        return versions_entry(self.streams)

    def load_state_dict(self, obj: dict[str, Any]) -> None:
        """Resume from a checkpoint at the next ``__iter__`` (this process and its DataLoader workers).

        A state for an epoch this dataset has already started iterating cannot be honoured mid-way: then it
        warns (upstream ignores it silently) and takes effect from the next epoch boundary as upstream does.
        A checkpoint taken mid-epoch on another version of a dataset that ``incremental_to_mds`` keeps is refused
        with a ValueError saying how to resume (`streaming.dataset.checkpoint_version`), and so is one with a value
        out of range for this dataset, or whose epoch plan would not fit in memory (PlanMemoryError)
        (`streaming.dataset.checkpoint_values`).
        """
        if not isinstance(obj, Mapping):
            raise InvalidCheckpointError(f"load_state_dict: a checkpoint is a dict, got {type(obj).__name__}.")
        if self._reads_delta:
            from streaming.dataset.delta_stream import repin

            # The checkpoint's table versions, pinned again: its position counts samples of their order.
            if repin(self.streams, dict(obj)):
                world = self._unique_world
                self._set_up_shards([_shard_table(stream, world, self.allow_unsafe_types) for stream in self.streams])
        obj = checked_resume(dict(obj), self._dataset_version(), self.epoch_size)
        world = self._parallel_world
        batch_size = self.batch_size if isinstance(self.batch_size, int) and self.batch_size > 0 else None
        obj = checked_checkpoint(
            obj,
            CheckpointBounds(
                self.epoch_size,
                world.num_nodes,
                world.num_ranks,
                self.num_canonical_nodes,
                batch_size,
                self._resume_built_whole,
            ),
        )
        if obj and obj["epoch"] < self.next_epoch and self.next_epoch > 0:
            warnings.warn(
                f"load_state_dict: this dataset has already started epoch {self.next_epoch - 1}, so the "
                f"checkpoint of epoch {obj.get('epoch')} at sample {obj.get('sample_in_epoch')} is stale "
                f"and will be ignored; load checkpoints into a freshly constructed dataset.",
                stacklevel=2,
            )
        self._state.write_resume(obj)

    def _resume_built_whole(self, num_canonical_nodes: int, initial_physical_nodes: int, sample_in_epoch: int) -> bool:
        """Whether resuming at this checkpoint's values builds the epoch's plan whole (`_get_work`'s choice for a
        plan too large to be small)."""
        if self._shard_cache.prefetches or self.batch_size is None:
            return True
        plan = replace(
            self._plan_inputs(), num_canonical_nodes=num_canonical_nodes, initial_physical_nodes=initial_physical_nodes
        )
        world = self._parallel_world
        return not computes_layout(plan, world.num_nodes, world.ranks_per_node, sample_in_epoch)

    def _begin_epoch(self, world: World) -> tuple[int, int, int]:
        """Count this worker's iterations; return that count, and the epoch and position this one starts at."""
        presumed = self._state.next_iteration(world.worker_of_rank)
        _, resume = self._state.read_resume()
        if resume is not None and resume.get("epoch", -1) >= presumed:
            epoch = int(resume["epoch"])
            self._state.set_iterations(world.worker_of_rank, epoch + 1)
            self.num_canonical_nodes = int(resume["num_canonical_nodes"])
            self.shuffle_seed = int(resume["shuffle_seed"])
            self.initial_physical_nodes = resume.get("initial_physical_nodes")
            return presumed, epoch, int(resume["sample_in_epoch"])
        return presumed, presumed, 0

    # ------------------------------------------------------------------ iteration

    def _get_work(self, world: World, epoch: int, sample_in_epoch: int) -> PlanRun:
        """This worker's sample ids for the epoch, -1 where there is none, read only as iteration reaches them.

        For a reader alone on its node, or a plan larger than a small one (`plan_is_small`: about 22M samples), a
        `StreamedShare` that computes the ids as they are read, when the plan's layout is one it handles; else a
        view of the mapped plan file (built once per node and shared by its readers). Each streamed reader sorts
        the whole epoch's order a window at a time (about 0.3 us a sample), which for a small plan costs more than
        building it once.
        """
        plan = self._plan_inputs()
        alone = world.ranks_per_node * world.workers_per_rank == 1
        # Prefetching needs where the share first needs each shard before its first sample: that walks the whole
        # share, which the plan file already holds.
        if not self._shard_cache.prefetches and (
            alone or not plan_is_small(plan.epoch_size, world.num_workers, plan.batch_size, plan.num_canonical_nodes, 1)
        ):
            shared = None if alone else self._state.shared_file
            streamed = streamed_share(plan, world, epoch, sample_in_epoch, shared)
            if streamed is not None:
                return streamed
        # The file name is the plan's identity: any input that changes the order names another file, so
        # workers never reuse a stale plan and the first one to ask builds it (under the file's build lock).
        key = (
            f"plan-e{epoch}-s{sample_in_epoch}-n{world.num_nodes}-r{world.ranks_per_node}"
            f"-w{world.workers_per_rank}-c{plan.num_canonical_nodes}-seed{plan.shuffle_seed}"
            f"-p{plan.initial_physical_nodes}.npy"
        )

        def build(path: str) -> None:
            work = generate_work(self.batching_method, plan, world, epoch, sample_in_epoch)
            with open(path, "wb") as out:
                np.save(out, work[world.node], allow_pickle=False)

        node_work = np.load(self._state.shared_file(key, build), mmap_mode="r")
        # One worker's batches are contiguous in the file: the reshape is a view, nothing is read yet.
        return node_work[world.rank_of_node, world.worker_of_rank].reshape(-1)

    def __iter__(self) -> Iterator[Any]:
        """This worker's samples of the next epoch, each as ``self[sample_id]`` returns it (upstream's contract).

        Upstream's extension point is that override: its text, vision and WebVid datasets, llm-foundry's and
        most users' subclasses turn the stored sample into what the model takes in ``__getitem__`` or
        ``get_item``. Without an override the samples are read from the shard readers directly, which is the
        same result without two calls per sample.
        """
        return self._iter_epoch(through_getitem=overrides_item_access(type(self)))

    def _epoch_work(self) -> tuple[PlanRun, int, bool]:
        """Start this worker's next epoch: its sample ids in order (-1 where there is none, a view of the mapped
        plan that `WorkerShare` reads a chunk at a time), the number of readers on the node (every rank's
        DataLoader workers), and whether this is the worker's first iteration."""
        if self.predownload < 0:
            # Upstream accepts it (random access never uses it) and then waits forever at the first epoch.
            raise ValueError(f"predownload must be non-negative to iterate, got {self.predownload}.")
        unique = self._unique_world.detect_workers()
        parallel = unique.replicate(self.replication) if self.replication is not None else unique
        iteration, epoch, sample_in_epoch = self._begin_epoch(unique)
        if iteration > 0:
            _share_batches_by_name()
        return self._get_work(parallel, epoch, sample_in_epoch), unique.workers_per_node, iteration == 0

    def _prefetching(self, sample_ids: PlanRun, readers_on_node: int) -> contextlib.AbstractContextManager[Any]:
        """The shard cache's prefetcher for a reader of ``sample_ids`` when shards must be prepared ahead, else a
        context of None."""
        if not self._shard_cache.prefetches:
            return contextlib.nullcontext()
        needs = first_needs(sample_ids, self.sample_offset_per_shard)
        return self._shard_cache.prefetch(needs, self.predownload, readers_on_node)

    def _iter_epoch(self, through_getitem: bool) -> Iterator[Any]:
        """The next epoch's samples of this worker: ``self[sample_id]`` when ``through_getitem``, else the stored
        samples straight from the shard readers."""
        sample_ids, readers_on_node, first_iteration = self._epoch_work()
        share = WorkerShare(sample_ids, self.sample_offset_per_shard)
        readers = self.readers
        position = 0
        with self._prefetching(sample_ids, readers_on_node) as prefetcher:
            # A chunk is as many samples as are read between two releases of their shards' pages.
            for shard_chunk, index_chunk in self._chunks(share, first_iteration, len(sample_ids)):
                shard_ids = shard_chunk.tolist()
                if prefetcher is not None:
                    read = self._read_through_getitem if through_getitem else self._read
                    for shard_id, index in zip(shard_ids, index_chunk.tolist()):
                        prefetcher.reached(position, shard_id)
                        position += 1
                        yield read(shard_id, index)
                elif through_getitem:
                    for shard_id, index in zip(shard_ids, index_chunk.tolist()):
                        yield self._read_through_getitem(shard_id, index)
                else:
                    for shard_id, index in zip(shard_ids, index_chunk.tolist()):
                        yield readers[shard_id].get_item(index)
                readers.release_pages(set(shard_ids))

    def _chunks(self, share: WorkerShare, first_iteration: bool, share_length: int) -> Iterator[Located]:
        """The share's chunks of samples; in a first iteration long enough to repay it, batches go by name from
        the worker's third batch on (`_share_batches_by_name`).

        torch sends a worker the index of its third batch once the main process has received its first, so the
        first batch never waits for the shared-memory manager's start (~0.2 s, holding the GIL); a batch still in
        flight by descriptor does (the worker's thread that serves its descriptor waits for the GIL), so one of
        the next few batches comes ~0.2 s late, once. That start cost ~0.5 s of a first epoch here (2 workers on 2
        cores, while they also start), and a name saves ~15 us a sample: a worker's share of `NAME_MID_EPOCH`
        samples or more gains it back within the epoch (a long first epoch: llm-foundry's one epoch of a
        pretraining run); shorter ones switch at their next iteration, as before.
        """
        if first_iteration and self.batch_size and share_length >= NAME_MID_EPOCH:
            first = share.take(2 * self.batch_size)
            if len(first[0]):
                yield first
            _share_batches_by_name()
        yield from share.chunks(RELEASE_PAGES_EVERY)

    def iter_batches(self, batch_size: int | None = None, drop_last: bool = False) -> Iterator[Columns]:
        """This worker's samples of the next epoch, ``batch_size`` at a time, each batch read as columns.

        The batch read path (`get_batch`): the same samples in the same order as iterating the dataset, cut
        into consecutive batches as a DataLoader's fetcher cuts them (``drop_last`` drops a last, smaller
        one), each returned as `streaming.format.columns.Columns` rather than as a list of dicts. It counts
        as an iteration of the dataset (epochs, ``state_dict`` and resumption are the same).

        Args:
            batch_size: samples per batch (default: the dataset's ``batch_size``).
            drop_last: leave out a last batch smaller than ``batch_size``.

        Raises:
            TypeError: the class overrides ``__getitem__`` or ``get_item``: its samples are what those return,
                which only a per-sample read gives.
        """
        reads = self.iter_batch_reads(batch_size, drop_last)
        size = batch_size or self.batch_size
        assert size is not None  # checked by iter_batch_reads
        return (read.columns(start, start + size) for read in reads for start in range(0, read.count, size))

    def iter_batch_reads(
        self, batch_size: int | None = None, drop_last: bool = False, batches_per_read: int | Iterable[int] = 1
    ) -> Iterator[BatchRead]:
        """`iter_batches` one step earlier, and several batches at a time: each read holds the samples of
        ``batches_per_read`` consecutive batches (an int, or one count per read), located and checked, their
        stacked columns not yet copied (`BatchRead`). A batch is rows ``k * batch_size ..`` of its read; only the
        epoch's last may be smaller (none with ``drop_last``). `StreamingDataLoader`'s workers copy each batch
        once, into shared memory, and pay the per-read costs once per message. Each read must be consumed
        before the next is taken."""
        if overrides_item_access(type(self)):
            raise TypeError(
                f"{type(self).__name__} overrides __getitem__ or get_item, so its samples are what those return; "
                f"iterate it sample by sample (a DataLoader does) instead of by batches."
            )
        size = batch_size or self.batch_size
        if size is None or size < 1:
            raise ValueError(f"Batch reads need a positive batch_size (or the dataset's), got {size}.")
        counts = itertools.repeat(batches_per_read) if isinstance(batches_per_read, int) else iter(batches_per_read)
        return self._iter_batch_reads(size, drop_last, counts)

    def _iter_batch_reads(self, batch_size: int, drop_last: bool, counts: Iterator[int]) -> Iterator[BatchRead]:
        sample_ids, readers_on_node, _ = self._epoch_work()
        share = WorkerShare(sample_ids, self.sample_offset_per_shard)
        # Samples smaller than a page drawn from across large shards (a shuffled table) map a page each, and
        # unmapping a shard whose pages are all mapped, then faulting them in again, costs more than gathering the
        # rows: 4,096 random rows of 400 bytes from 400 MB take 1.0 ms mapped, 4 ms releasing after every batch,
        # and one release of 40 MB of mapped pages takes 4 ms, here. Such reads release their pages every
        # RELEASE_SCATTERED_BATCHES batches; the pages stay page cache shared by the workers that read them.
        # Other reads keep the per-sample loop's pace, so a sequential read maps no more than it does.
        small_samples = self.bytes_per_sample < mmap.PAGESIZE
        release_scattered = max(RELEASE_PAGES_EVERY, RELEASE_SCATTERED_BATCHES * batch_size)
        unreleased: set[int] = set()
        read_since_release = 0
        start = 0
        with self._prefetching(sample_ids, readers_on_node) as prefetcher:
            while share.has_more():
                shard_ids, indices = share.take(max(1, next(counts)) * batch_size)
                if drop_last:
                    # Only the share's last read can be short of whole batches.
                    whole = len(shard_ids) - len(shard_ids) % batch_size
                    shard_ids, indices = shard_ids[:whole], indices[:whole]
                    if not whole:
                        return
                groups = _by_shard(shard_ids)
                if prefetcher is not None:
                    for shard_id, positions in groups:
                        prefetcher.reached(start + (0 if positions is None else int(positions[0])), shard_id)
                yield self._prepare_batch(shard_ids, indices, groups)
                unreleased.update(shard_id for shard_id, _ in groups)
                read_since_release += len(indices)
                scattered = small_samples and _scattered(indices, groups)
                if read_since_release >= (release_scattered if scattered else RELEASE_PAGES_EVERY):
                    self.readers.release_pages(unreleased)
                    unreleased.clear()
                    read_since_release = 0
                start += len(indices)

    def _read_through_getitem(self, shard_id: int, index: int) -> Any:
        return self[self._shard_starts[shard_id] + index]

    # ------------------------------------------------------------------ shards and random access (upstream's API)

    def prepare_shard(self, shard_id: int, blocking: bool = True) -> None:
        """Make one shard's raw files present locally, evicting cold shards first when over ``cache_limit``.

        With ``blocking=False``, return at once if another thread or process is preparing it.
        """
        self._shard_cache.prepare(shard_id, blocking)

    def evict_shard(self, shard_id: int) -> None:
        """Delete one shard's local files (only for shards that can be downloaded again)."""
        self._shard_cache.evict(shard_id)

    def evict_coldest_shard(self) -> None:
        """Delete the least recently used evictable shard that no process is preparing."""
        self._shard_cache.evict_coldest()

    def _read(self, shard_id: int, index: int, retry: int = 7) -> dict[str, Any]:
        refetched = False
        for _ in range(retry + 1):
            try:
                sample = self.readers[shard_id].get_item(index)
            except FileNotFoundError:
                # Its files vanished from local disk (evicted, or the directory was cleaned): fetch it again.
                self._shard_cache.forget(shard_id)
                self.prepare_shard(shard_id)
                continue
            except ShardCorruptError:
                # A local copy that does not match the index: torn by a power loss (shard downloads are not
                # fsynced) or damaged since. Fetched again once; a remote copy that is itself bad fails again.
                if refetched or not self._shard_cache.evictable[shard_id]:
                    raise
                refetched = True
                self._shard_cache.evict(shard_id)
                self.prepare_shard(shard_id)
                continue
            self._shard_cache.touch(shard_id)
            return sample
        hint = (
            " This usually means cache_limit is set too low and shards are evicted before they are read."
            if self.cache_limit is not None
            else " Check that the shard file exists in your remote location."
        )
        raise RuntimeError(f"Could not read sample {index} of shard {shard_id} after {retry + 1} attempts.{hint}")

    def get_item(self, sample_id: int, retry: int = 7) -> Any:
        """Read one sample by global index, downloading its shard if needed."""
        starts = self._shard_starts
        shard_id = bisect_right(starts, sample_id) - 1
        # The common case inline (shard mapped, files present): one call fewer per sample than through `_read`,
        # which only handles a shard whose files are missing.
        try:
            sample = self.readers[shard_id].get_item(sample_id - starts[shard_id])
        except (FileNotFoundError, ShardCorruptError):
            return self._read(shard_id, sample_id - starts[shard_id], retry)
        self._shard_cache.touch(shard_id)
        return sample

    def get_batch(self, sample_ids: Sequence[int] | np.ndarray) -> Columns:
        """Read many samples by global index at once, as columns (`streaming.format.columns`), downloading
        their shards if needed.

        ``batch[name][i]`` is the stored value of sample ``sample_ids[i]`` as `get_item` reads it (a subclass's
        own ``__getitem__`` or ``get_item`` is not applied). Numbers and arrays of one dtype and shape come
        stacked in one numpy array per column, gathered from the mapped shards in a few numpy operations per
        column; other columns come as lists.
        """
        ids = np.asarray(sample_ids, np.int64).reshape(-1)
        outside = (ids < 0) | (ids >= self.num_samples)
        if outside.any():
            raise IndexError(
                f"Sample {int(ids[outside][0])} is out of range for a dataset of {self.num_samples} samples."
            )
        if not len(ids):
            return {}
        shard_ids = np.searchsorted(self.sample_offset_per_shard, ids, "right") - 1
        indices = ids - self.sample_offset_per_shard[shard_ids]
        return self._prepare_batch(shard_ids, indices, _by_shard(shard_ids)).columns()

    def _prepare_batch(self, shard_ids: np.ndarray, indices: np.ndarray, groups: list[ShardGroup]) -> BatchRead:
        """The samples at ``indices`` of ``shard_ids`` (grouped by `_by_shard`), located, checked, lists decoded."""
        try:
            return self._locate_batch(shard_ids, indices, groups)
        except Exception as err:  # noqa: BLE001 - any failure is looked at sample by sample below
            failure = err
        # Sample by sample, `_read` fetches a vanished shard again, fetches a torn local copy again once, and
        # raises the per-sample error of a sample that does not decode.
        samples = [self._read(shard_id, index) for shard_id, index in zip(shard_ids.tolist(), indices.tolist())]
        if not isinstance(failure, (FileNotFoundError, ShardCorruptError)):
            raise RuntimeError(
                f"Reading {len(indices)} samples as one batch failed although each of them reads alone: {failure}"
            ) from failure
        return BatchRead.of_columns(columns_of(samples))

    def _locate_batch(self, shard_ids: np.ndarray, indices: np.ndarray, groups: list[ShardGroup]) -> BatchRead:
        """The batch in the mapped shards, or read sample by sample where they do not allow a batch read."""
        segments = []
        gather = None
        for shard_id, positions in groups:
            reader = self.readers[shard_id]
            chosen = indices if positions is None else indices[positions]
            if isinstance(reader, MDSReader):
                shard_gather, view = reader.batch_view()
                parts = [Segment(view, chosen, positions)]
            elif hasattr(reader, "batch_segments"):  # a Delta table's file: a segment per row group
                shard_gather, parts = reader.batch_segments(chosen, positions)
                if shard_gather is None:  # its row groups type a column apart: read sample by sample
                    gather = None
                    break
            else:
                gather = None
                break
            if gather is not None and shard_gather is not gather:
                gather = None  # shards of different columns: a per-sample batch collates (or fails) as torch's
                break
            gather = shard_gather
            segments.extend(parts)
        if gather is None:
            samples = [self._read(shard_id, index) for shard_id, index in zip(shard_ids.tolist(), indices.tolist())]
            return BatchRead.of_columns(columns_of(samples))
        read = gather.prepare(segments, len(indices))
        for shard_id, _ in groups:
            self._shard_cache.touch(shard_id)
        return read

    def __getitem__(self, at: Any) -> Any:
        if type(at) is int and 0 <= at < self.num_samples:
            return self.get_item(at)
        return super().__getitem__(at)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle for DataLoader workers: the cache drops its open state itself; the claims stay with this process."""
        return {**self.__dict__, "_local_claims": None}

    def __del__(self) -> None:
        state = self.__dict__.get("_state")
        if state is not None:
            state.close()
