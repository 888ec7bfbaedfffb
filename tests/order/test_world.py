"""World: derived fields, detection from the environment and DataLoader workers, replication."""

import sys

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

from streaming.dataset.world import World


def test_derived_fields():
    world = World(num_nodes=2, ranks_per_node=4, workers_per_rank=3, worker=17)
    assert (world.node, world.rank, world.rank_of_node, world.worker_of_rank) == (1, 5, 1, 2)
    assert (world.num_ranks, world.num_workers, world.workers_per_node) == (8, 24, 12)
    assert world.worker_of_node == 5 and world.is_multinode
    assert not world.is_leader and not world.is_local_leader
    assert World(2, 4, 3, 12).is_local_leader and World(2, 4, 3, 0).is_leader
    assert world.to_json()["rank_of_node"] == 1


def test_invalid_fields_are_named():
    with pytest.raises(ValueError, match="`ranks_per_node` must be a positive integer"):
        World(1, 0, 1, 0)
    with pytest.raises(ValueError, match=r"`worker` must be in \[0, 4\)"):
        World(1, 2, 2, 4)


def test_detect_from_environment(monkeypatch):
    monkeypatch.setenv("RANK", "6")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert World.detect() == World(2, 4, 1, 6)


def test_detect_defaults_to_a_single_process(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert World.detect() == World(1, 1, 1, 0)


def test_detect_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.data", None)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert World.detect() == World(1, 2, 1, 1)


def test_detect_rejects_inconsistent_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "6")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match=r"WORLD_SIZE \(6\) must be a positive multiple"):
        World.detect()


class _Worlds(IterableDataset):
    def __iter__(self):
        yield World.detect().to_json()


def test_detect_inside_dataloader_workers(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    loader = DataLoader(_Worlds(), batch_size=None, num_workers=2, multiprocessing_context="fork")
    seen = sorted((w["worker"], w["workers_per_rank"], w["rank"]) for w in loader)
    assert seen == [(2, 2, 1), (3, 2, 1)]
    assert torch.utils.data.get_worker_info() is None


def test_detect_workers_keeps_the_rank():
    assert World(2, 2, 4, 13).detect_workers() == World(2, 2, 1, 3)


def test_replicate_keeps_nodes_when_ranks_fill_them():
    world = World(4, 2, 2, 13)  # rank 6, worker 1 of its rank
    replicated = world.replicate(2)
    assert replicated == World(2, 2, 2, 7)
    assert replicated.rank == 3 and replicated.num_ranks == 4


def test_replicate_onto_one_node_when_ranks_do_not_fill_nodes():
    replicated = World(1, 8, 1, 5).replicate(4)
    assert (replicated.num_nodes, replicated.ranks_per_node, replicated.rank) == (1, 2, 1)


def test_replicate_needs_a_divisor_of_the_world():
    with pytest.raises(ValueError, match=r"^World size must be divisible by your replication factor\. .*replication 3"):
        World(1, 8, 1, 0).replicate(3)
    assert World(1, 2, 1, 1).copy() == World(1, 2, 1, 1)
