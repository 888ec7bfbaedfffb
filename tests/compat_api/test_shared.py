"""Upstream's `streaming.base.shared` and `streaming.base.constant`, used across real processes."""

from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np
import pytest

from streaming.base import constant
from streaming.base.shared import SharedArray, SharedBarrier, SharedMemory, SharedScalar, get_shm_prefix
from streaming.base.world import World

SPAWN = multiprocessing.get_context("spawn")
ROUNDS = 3


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    """A private coordination root, inherited by the processes each test starts."""
    root = tmp_path / "state"
    monkeypatch.setenv("STREAMING_STATE_DIR", str(root))
    return root


def _barrier_worker(proc: int, num_procs: int, lock_path: str) -> None:
    barrier = SharedBarrier(lock_path, "test_barrier")
    entered = SharedArray((ROUNDS, num_procs), np.int32, "test_entered")
    seen = SharedArray((ROUNDS, num_procs), np.int32, "test_seen")
    for round_id in range(ROUNDS):
        if proc == round_id % num_procs:
            time.sleep(0.3)  # this round's latecomer: everyone else must wait for it
        entered[round_id, proc] = 1
        barrier(num_procs)
        seen[round_id, proc] = int(entered[round_id].sum())


def _run(target, *args_per_process) -> None:
    procs = [SPAWN.Process(target=target, args=args) for args in args_per_process]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0, f"{proc.name} exited with {proc.exitcode}"


def test_shared_barrier_holds_every_process_until_all_enter_and_is_reusable(tmp_path):
    num_procs = 2
    lock_path = str(tmp_path / "barrier.lock")
    barrier = SharedBarrier(lock_path, "test_barrier")  # built by the "rank", called by its workers
    assert (barrier.num_enter, barrier.num_exit, barrier.flag) == (0, -1, True)
    seen = SharedArray((ROUNDS, num_procs), np.int32, "test_seen")
    entered = SharedArray((ROUNDS, num_procs), np.int32, "test_entered")
    _run(_barrier_worker, *[(proc, num_procs, lock_path) for proc in range(num_procs)])
    # Each process, on leaving the barrier of each round, saw that every process had entered that round.
    assert seen.numpy().tolist() == [[num_procs] * num_procs] * ROUNDS
    assert entered.numpy().sum() == ROUNDS * num_procs
    assert barrier.num_enter == 0 and barrier.flag
    with barrier.lock:  # the lock is a real inter-process lock that this process can take too
        pass


def _write_array(name: str, value: int) -> None:
    array = SharedArray((4, 3), np.int64, name)
    array[:, 1] = value
    array[2] = [7, 8, 9]
    SharedScalar(np.float64, f"{name}_scalar").set(value / 2)


def _read_array(name: str, out_name: str) -> None:
    source = SharedArray((4, 3), np.int64, name)
    SharedArray((4, 3), np.int64, out_name)[:] = source.numpy() * 10


def test_shared_array_and_scalar_written_by_one_process_are_read_by_another():
    array = SharedArray((4, 3), np.int64, "arr")
    scalar = SharedScalar(np.float64, "arr_scalar")
    _run(_write_array, ("arr", 5))
    assert array.numpy().tolist() == [[0, 5, 0], [0, 5, 0], [7, 8, 9], [0, 5, 0]]
    assert len(array) == 4 and array[2, 2] == 9 and scalar.get() == 2.5
    array[0, 0] = -1
    out = SharedArray((4, 3), np.int64, "out")
    _run(_read_array, ("arr", "out"))
    assert out.numpy()[0].tolist() == [-10, 50, 0] and out[2].tolist() == [70, 80, 90]


def test_shared_memory_block_of_a_dead_creator_is_attachable_until_cleanup():
    block = SharedMemory("blk", create=True, size=8)
    assert block.created and len(block.buf) == 8
    block.buf[:3] = b"abc"
    other = SharedMemory("blk", create=False)
    assert not other.created and bytes(other.buf[:3]) == b"abc"
    assert block.fix_register("blk", "shared_memory") is None  # nothing for the resource tracker to fix
    other.cleanup()
    block.cleanup()
    with pytest.raises(FileNotFoundError):
        SharedMemory("blk", create=False)


def _follow(locals_: list[str], out_name: str) -> None:
    world = World(num_nodes=1, ranks_per_node=2, workers_per_rank=1, worker=1)
    prefix_int, block = get_shm_prefix(locals_, ["s3://b/x"] * len(locals_), world)
    SharedScalar(np.int64, out_name).set(prefix_int)
    assert bytes(block.buf[4:9]) == locals_[0][:5].encode()


def test_get_shm_prefix_leader_and_follower_agree_and_reuse_is_refused(tmp_path):
    leader = World(num_nodes=1, ranks_per_node=2, workers_per_rank=1, worker=0)
    first = [str(tmp_path / "a"), str(tmp_path / "b")]
    result = SharedScalar(np.int64, "follower_prefix")
    result.set(-1)
    follower = SPAWN.Process(target=_follow, args=(first, "follower_prefix"))
    follower.start()  # may start looking before the leader publishes
    time.sleep(0.2)
    prefix_int, block = get_shm_prefix(first, ["s3://b/x", None], leader)
    follower.join(60)
    assert follower.exitcode == 0 and prefix_int == 0 and result.get() == 0

    # A second dataset gets the next prefix; one that reuses a local directory that has a remote is refused.
    second_prefix, second = get_shm_prefix([str(tmp_path / "c")], ["s3://b/y"], leader)
    assert second_prefix == 1
    with pytest.raises(ValueError, match="Reused local directory"):
        get_shm_prefix([first[0]], ["s3://b/z"], leader, retry=0)
    with pytest.raises(ValueError, match="Reused local directory"):
        get_shm_prefix([first[0], first[0]], [None, None], leader)
    block.cleanup()
    second.cleanup()
    assert get_shm_prefix([first[0]], ["s3://b/z"], leader)[0] == 0


def test_a_follower_without_a_leader_times_out():
    follower = World(num_nodes=1, ranks_per_node=2, workers_per_rank=1, worker=1)
    with pytest.raises(TimeoutError, match="local leader"):
        get_shm_prefix([os.getcwd()], [None], follower, retry=2)


def test_constants_are_upstreams():
    assert constant.SHM_TO_CLEAN[0] == constant.LOCALS == "locals" and constant.RESUME == "resume"
    assert len(constant.SHM_TO_CLEAN) == 9 and constant.TICK == 0.007 and constant.DEFAULT_TIMEOUT == 60.0
    assert (constant.BARRIER_FILELOCK, constant.CACHE_FILELOCK) == ("barrier_filelock", "cache_filelock")
