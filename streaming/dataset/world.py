"""Who this process is: node, rank and DataLoader worker, as counts and indices.

A `World` is built from four numbers (nodes, ranks per node, workers per rank, global worker
index); every other field is derived from them. All counts are global except the `*_per_*` ones,
so `num_workers` is the number of workers in the whole job, not the DataLoader's `num_workers`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


def _env_int(name: str, default: int) -> int:
    """Read a non-negative integer environment variable, naming it in the error if malformed."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Environment variable {name}={raw!r} is not an integer.") from None
    if value < 0:
        raise ValueError(f"Environment variable {name}={value} must be non-negative.")
    return value


def _detect_worker() -> tuple[int, int]:
    """Return (worker id within this rank, workers per rank) from PyTorch, or (0, 1) without it."""
    try:
        from torch.utils.data import get_worker_info
    except ImportError:
        return 0, 1
    info = get_worker_info()
    if info is None:
        return 0, 1
    return info.id, info.num_workers


@dataclass(frozen=True)
class World:
    """The position of one process (or DataLoader worker) in the training job.

    Args:
        num_nodes: Number of nodes.
        ranks_per_node: Ranks (devices) per node; all nodes are assumed alike.
        workers_per_rank: DataLoader workers per rank (1 when iterating in the main process).
        worker: Global worker index, in ``[0, num_nodes * ranks_per_node * workers_per_rank)``.
    """

    num_nodes: int
    ranks_per_node: int
    workers_per_rank: int
    worker: int

    def __post_init__(self) -> None:
        for name in ("num_nodes", "ranks_per_node", "workers_per_rank"):
            value = getattr(self, name)
            if int(value) != value or value < 1:
                raise ValueError(f"World `{name}` must be a positive integer, got {value!r}.")
        if not 0 <= self.worker < self.num_workers:
            raise ValueError(f"World `worker` must be in [0, {self.num_workers}), got {self.worker!r}.")

    # Nodes.
    @property
    def node(self) -> int:
        """Index of this node."""
        return self.worker // self.workers_per_node

    @property
    def is_multinode(self) -> bool:
        """Whether the job spans more than one node."""
        return self.num_nodes > 1

    # Ranks.
    @property
    def rank(self) -> int:
        """Global rank."""
        return self.worker // self.workers_per_rank

    @property
    def num_ranks(self) -> int:
        """Number of ranks in the job."""
        return self.num_nodes * self.ranks_per_node

    @property
    def rank_of_node(self) -> int:
        """Rank within this node (local rank)."""
        return self.rank % self.ranks_per_node

    # Workers.
    @property
    def num_workers(self) -> int:
        """Number of workers in the job."""
        return self.num_nodes * self.ranks_per_node * self.workers_per_rank

    @property
    def workers_per_node(self) -> int:
        """Workers on each node."""
        return self.ranks_per_node * self.workers_per_rank

    @property
    def worker_of_node(self) -> int:
        """Worker index within this node."""
        return self.worker % self.workers_per_node

    @property
    def worker_of_rank(self) -> int:
        """Worker index within this rank (the DataLoader worker id)."""
        return self.worker % self.workers_per_rank

    # Leaders.
    @property
    def is_leader(self) -> bool:
        """Whether this is worker 0 of the whole job."""
        return self.worker == 0

    @property
    def is_local_leader(self) -> bool:
        """Whether this is worker 0 of its node."""
        return self.worker_of_node == 0

    @classmethod
    def detect(cls) -> World:
        """Build the world of the calling process.

        Ranks come from the environment variables ``RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE``
        (defaults 0, 1, 1); workers from ``torch.utils.data.get_worker_info()`` when PyTorch is
        installed and this is a DataLoader worker, else one worker per rank.
        """
        rank = _env_int("RANK", 0)
        world_size = _env_int("WORLD_SIZE", 1)
        ranks_per_node = _env_int("LOCAL_WORLD_SIZE", 1)
        if world_size < 1 or ranks_per_node < 1 or world_size % ranks_per_node:
            raise ValueError(
                f"WORLD_SIZE ({world_size}) must be a positive multiple of LOCAL_WORLD_SIZE ({ranks_per_node})."
            )
        if rank >= world_size:
            raise ValueError(f"RANK ({rank}) must be less than WORLD_SIZE ({world_size}).")
        worker_of_rank, workers_per_rank = _detect_worker()
        return cls(
            world_size // ranks_per_node, ranks_per_node, workers_per_rank, rank * workers_per_rank + worker_of_rank
        )

    def detect_workers(self) -> World:
        """Return this world with the DataLoader workers of the calling process re-detected."""
        worker_of_rank, workers_per_rank = _detect_worker()
        return World(
            self.num_nodes, self.ranks_per_node, workers_per_rank, self.rank * workers_per_rank + worker_of_rank
        )

    def replicate(self, replication: int) -> World:
        """Return the world as seen when groups of ``replication`` consecutive ranks share samples.

        Ranks ``r*k .. r*k + r-1`` all become rank ``k`` (used for tensor/sequence parallelism).
        The replicated ranks keep the node layout when they fill whole nodes; otherwise they are
        all placed on one node.
        """
        if int(replication) != replication or replication < 1:
            raise ValueError(f"Replication factor must be positive. Got {replication!r}.")
        if self.num_ranks % replication:
            raise ValueError(
                f"World size must be divisible by your replication factor. Got {self.num_ranks} ranks and "
                f"replication {replication}."
            )
        num_ranks = self.num_ranks // replication
        rank = self.rank // replication
        if num_ranks % self.ranks_per_node == 0:
            num_nodes = num_ranks // self.ranks_per_node
        else:
            num_nodes = 1
        return World(
            num_nodes, num_ranks // num_nodes, self.workers_per_rank, rank * self.workers_per_rank + self.worker_of_rank
        )

    def copy(self) -> World:
        """Return an equal world (worlds are immutable; kept for upstream compatibility)."""
        return World(self.num_nodes, self.ranks_per_node, self.workers_per_rank, self.worker)

    def to_json(self) -> dict[str, Any]:
        """Return every field, base and derived, as a JSON-ready dict."""
        names = (
            "node",
            "num_nodes",
            "is_multinode",
            "rank",
            "num_ranks",
            "rank_of_node",
            "ranks_per_node",
            "worker",
            "num_workers",
            "worker_of_node",
            "workers_per_node",
            "worker_of_rank",
            "workers_per_rank",
            "is_leader",
            "is_local_leader",
        )
        return {name: getattr(self, name) for name in names}
