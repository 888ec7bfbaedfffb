"""Node-local coordination: instance state, shard locks, cache accounting and cleanup, with real processes."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pickle
import queue
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from streaming.base.shared import SharedArray, SharedMemory, SharedScalar
from streaming.dataset.coordination import CacheState, InstanceState, ShardLocks, clean_stale_state, state_root
from streaming.dataset.coordination import root as root_module

FORK = mp.get_context("fork")
SPAWN = mp.get_context("spawn")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    """Each test gets its own state root (inherited by child processes through the environment)."""
    path = str(tmp_path / "state")
    monkeypatch.setenv("STREAMING_STATE_DIR", path)
    return path


class DirScan:
    """A picklable scan callback: shard ``i`` is the file ``<dir>/shard.<i>``; every call is logged."""

    def __init__(self, directory: str, num_shards: int, index_bytes: int = 100) -> None:
        self.directory, self.num_shards, self.index_bytes = directory, num_shards, index_bytes
        os.makedirs(directory, exist_ok=True)

    def __call__(self) -> tuple[np.ndarray, int]:
        with open(os.path.join(self.directory, "scan.log"), "a") as log:
            log.write(f"{os.getpid()}\n")
        sizes = [os.path.getsize(self.shard(i)) if os.path.exists(self.shard(i)) else 0 for i in range(self.num_shards)]
        return np.array(sizes, np.int64), self.index_bytes

    def shard(self, i: int) -> str:
        return os.path.join(self.directory, f"shard.{i}")

    def calls(self) -> int:
        with open(os.path.join(self.directory, "scan.log")) as log:
            return len(log.readlines())


def start_and_kill(script: str) -> list[str]:
    """Run ``script`` in a fresh interpreter until it prints ``ready``, then SIGKILL it; returns its output lines."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    lines = []
    for line in proc.stdout:
        if line.strip() == "ready":
            break
        lines.append(line.strip())
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    proc.stdout.close()
    return lines


def hold_until_killed(target, *args) -> mp.Process:
    """Start ``target(ready_event, *args)`` in a forked process and return it once it reports ready."""
    ready = FORK.Event()
    proc = FORK.Process(target=target, args=(ready, *args), daemon=True)
    proc.start()
    assert ready.wait(10)
    return proc


def kill(proc: mp.Process) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    assert proc.exitcode == -signal.SIGKILL


# ---------------------------------------------------------------------------------------------- state root


def test_state_root_override_and_default(state_dir, monkeypatch):
    assert state_root() == state_dir and os.path.isdir(state_dir)
    monkeypatch.delenv("STREAMING_STATE_DIR")
    root = state_root()
    assert os.path.basename(root) == f"streaming-{os.getuid()}"
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700


def test_private_dir_is_checked(tmp_path, monkeypatch):
    path = str(tmp_path / "mine")
    root_module.make_private_dir(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    os.chmod(path, 0o755)
    root_module.make_private_dir(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    not_dir = tmp_path / "file"
    not_dir.write_text("")
    with pytest.raises(RuntimeError, match="not a directory"):
        root_module.make_private_dir(str(not_dir))
    os.symlink(path, tmp_path / "link")
    with pytest.raises(RuntimeError, match="not a directory"):
        root_module.make_private_dir(str(tmp_path / "link"))
    monkeypatch.setattr(os, "getuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(PermissionError, match="STREAMING_STATE_DIR"):
        root_module.make_private_dir(path)


# ---------------------------------------------------------------------------------------------- InstanceState


def test_instances_in_one_process_are_independent(state_dir):
    a, b = InstanceState(), InstanceState()
    assert a.path != b.path and os.path.dirname(a.path) == state_dir and os.path.isdir(a.path)
    assert [a.next_iteration(0), a.next_iteration(0), b.next_iteration(0)] == [0, 1, 0]
    a.set_iterations(5, 9)
    assert a.iterations()[:6] == [2, 0, 0, 0, 0, 9] and b.iterations()[:6] == [1, 0, 0, 0, 0, 0]
    assert a.read_resume() == (0, None)
    assert a.write_resume({"epoch": 1, "b": [1, 2]}) == 1
    assert a.write_resume({"epoch": 2}) == 2
    assert a.read_resume() == (2, {"epoch": 2}) and b.read_resume() == (0, None)
    a.close()
    b.close()
    assert os.listdir(state_dir) == []


def _create_instance(results) -> None:
    state = InstanceState()
    state.write_resume({"pid": os.getpid()})
    results.put((state.path, state.next_iteration(0), state.read_resume()[1]["pid"] == os.getpid()))
    state.close()


def test_twenty_processes_create_instances_concurrently(state_dir):
    results = FORK.Queue()
    procs = [FORK.Process(target=_create_instance, args=(results,)) for _ in range(20)]
    for proc in procs:
        proc.start()
    got = [results.get(timeout=30) for _ in procs]
    for proc in procs:
        proc.join(10)
        assert proc.exitcode == 0
    assert len({path for path, _, _ in got}) == 20
    assert all(first == 0 and own for _, first, own in got)
    assert os.listdir(state_dir) == []


def test_instance_errors(state_dir):
    state = InstanceState()
    with pytest.raises(ValueError, match="0 to 1023"):
        state.next_iteration(1024)
    with pytest.raises(ValueError, match="0 to 1023"):
        state.set_iterations(-1, 0)
    with pytest.raises(ValueError, match="65536-byte limit"):
        state.write_resume({"x": "a" * 70000})
    assert state.read_resume() == (0, None)
    with pytest.raises(ValueError, match="Invalid shared file key '../x'"):
        state.shared_file("../x", lambda path: None)
    with pytest.raises(RuntimeError, match="without writing"):
        state.shared_file("nothing", lambda path: None)
    copy = pickle.loads(pickle.dumps(state))
    copy.close()  # an attached copy never deletes anything
    assert copy.next_iteration(3) == 0 and os.path.isdir(state.path)
    state.close()
    assert not os.path.exists(state.path) and os.listdir(state_dir) == []
    with pytest.raises(FileNotFoundError, match="is gone"):
        pickle.loads(pickle.dumps(state)).iterations()


def _attached_worker(state, results) -> None:
    if isinstance(state, bytes):
        state = pickle.loads(state)
    results.put((state.read_resume(), state.iterations()[:3], state.next_iteration(2)))
    state.close()


@pytest.mark.parametrize("how", ["fork-inherited", "fork-pickled", "spawn"])
def test_worker_attaches_to_owner_state(state_dir, how):
    state = InstanceState()
    state.write_resume({"epoch": 3, "sample_in_epoch": 64})
    state.set_iterations(1, 7)
    state.next_iteration(2)
    context = SPAWN if how == "spawn" else FORK
    arg = pickle.dumps(state) if how == "fork-pickled" else state
    results = context.Queue()
    proc = context.Process(target=_attached_worker, args=(arg, results))
    proc.start()
    resume, iterations, seen = results.get(timeout=60)
    proc.join(30)
    assert proc.exitcode == 0
    assert resume == (1, {"epoch": 3, "sample_in_epoch": 64})
    assert iterations == [0, 7, 1] and seen == 1
    assert state.iterations()[2] == 2
    assert os.path.isdir(state.path)  # the worker's close() left the owner's state alone
    state.close()


def _increment(state_bytes, slot, count, results) -> None:
    state = pickle.loads(state_bytes)
    seen = []

    def work():
        for _ in range(count):
            seen.append(state.next_iteration(slot))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(seen)


def test_next_iteration_is_atomic_across_processes_and_threads(state_dir):
    state = InstanceState()
    results = FORK.Queue()
    procs = [FORK.Process(target=_increment, args=(pickle.dumps(state), 4, 300, results)) for _ in range(4)]
    for proc in procs:
        proc.start()
    seen = sorted(value for _ in procs for value in results.get(timeout=60))
    for proc in procs:
        proc.join(10)
    assert seen == list(range(4 * 2 * 300))
    assert state.iterations()[4] == 2400
    state.close()


def _slow_build(path, log, delay):
    with open(log, "a") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(delay)
    with open(path, "w") as out:
        out.write(f"built by {os.getpid()}")


def _race_shared_file(state_bytes, log, results) -> None:
    state = pickle.loads(state_bytes)
    path = state.shared_file("plan-e0.npy", lambda tmp: _slow_build(tmp, log, 0.2))
    with open(path) as built:
        results.put((path, built.read()))


def test_shared_file_is_built_once(state_dir, tmp_path):
    state = InstanceState()
    log = str(tmp_path / "builds.log")
    results = FORK.Queue()
    procs = [FORK.Process(target=_race_shared_file, args=(pickle.dumps(state), log, results)) for _ in range(4)]
    for proc in procs:
        proc.start()
    got = [results.get(timeout=30) for _ in procs]
    for proc in procs:
        proc.join(10)
    with open(log) as builds:
        builders = builds.read().split()
    assert len(builders) == 1
    assert got == [(os.path.join(state.path, "plan-e0.npy"), f"built by {builders[0]}")] * 4
    state.close()


def _die_while_building(ready, state_bytes) -> None:
    state = pickle.loads(state_bytes)

    def build(tmp):
        with open(tmp, "w") as out:
            out.write("half")
        ready.set()
        time.sleep(60)

    state.shared_file("plan", build)


def test_shared_file_is_rebuilt_when_builder_is_killed(state_dir):
    state = InstanceState()
    proc = hold_until_killed(_die_while_building, pickle.dumps(state))
    kill(proc)
    start = time.monotonic()
    path = state.shared_file("plan", lambda tmp: open(tmp, "w").write("whole"))
    assert time.monotonic() - start < 1.0
    with open(path) as built:
        assert built.read() == "whole"
    state.close()


# ---------------------------------------------------------------------------------------------- ShardLocks


def _hold_shard(ready, local_dir, shard, release_after, log) -> None:
    locks = ShardLocks(local_dir, 10)
    with locks.hold(shard):
        ready.set()
        time.sleep(release_after)
        with open(log, "w") as out:
            out.write(repr(time.monotonic()))


def test_shard_locks_exclude_processes(state_dir, tmp_path):
    local = str(tmp_path / "local")
    os.makedirs(local)
    log = str(tmp_path / "released")
    proc = hold_until_killed(_hold_shard, local + "/", 5, 0.3, log)
    locks = ShardLocks(os.path.join(local, "."), 10)  # another spelling of the same directory
    with locks.try_hold(5) as held:
        assert held is False
    with locks.try_hold(6) as held:
        assert held is True
    with locks.hold(5):
        entered = time.monotonic()
    with open(log) as out:
        assert entered >= float(out.read())
    proc.join(10)
    assert proc.exitcode == 0
    with pytest.raises(IndexError, match="valid shards are 0 to 9"):
        locks.hold(10)


def test_shard_locks_exclude_threads(state_dir, tmp_path):
    first, second = ShardLocks(str(tmp_path), 4), ShardLocks(str(tmp_path), 4)
    inside, overlaps = [0], []

    def work(locks):
        for _ in range(200):
            with locks.hold(1):
                inside[0] += 1
                time.sleep(0)
                overlaps.append(inside[0])
                inside[0] -= 1

    threads = [threading.Thread(target=work, args=(locks,)) for locks in (first, second, first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(overlaps) == 800 and set(overlaps) == {1}

    with first.hold(2):
        with first.hold(2):  # the holding thread may nest
            outcome = []
            thread = threading.Thread(target=lambda: outcome.append(second.try_hold(2).__enter__()))
            thread.start()
            thread.join()
            assert outcome == [False]
    with second.try_hold(2) as held:
        assert held is True


# ---------------------------------------------------------------------------------------------- CacheState


def _mark_many(scan, start, results) -> None:
    cache = CacheState(["/data/a", "/data/b"], 50, scan)
    for i in range(60):
        shard = (start + i) % 50
        cache.mark_present(shard, 7)
        if i % 2:
            cache.mark_absent(shard, 7)
    results.put(cache.usage())


def test_cache_usage_stays_exact_under_concurrency(state_dir, tmp_path):
    scan = DirScan(str(tmp_path / "scan"), 50)
    cache = CacheState(["/data/a", "/data/b"], 50, scan)
    assert cache.usage() == 100
    results = FORK.Queue()
    procs = [FORK.Process(target=_mark_many, args=(scan, 13 * p, results)) for p in range(4)]
    for proc in procs:
        proc.start()
    for _ in procs:
        results.get(timeout=60)
    for proc in procs:
        proc.join(10)
        assert proc.exitcode == 0
    assert cache.usage() == 100 + 4 * 30 * 7
    assert scan.calls() == 1


def test_cache_first_opener_scans_and_later_openers_share(state_dir, tmp_path):
    scan = DirScan(str(tmp_path / "scan"), 4)
    with open(scan.shard(1), "wb") as out:
        out.write(b"x" * 30)
    cache = CacheState([str(tmp_path)], 4, scan)
    assert cache.usage() == 130 and cache.is_present(1) and not cache.is_present(0)
    cache.mark_present(2, 5)
    results = FORK.Queue()
    proc = FORK.Process(
        target=lambda: results.put(
            (CacheState([str(tmp_path)], 4, scan).usage(), pickle.loads(pickle.dumps(cache)).is_present(2))
        )
    )
    proc.start()
    assert results.get(timeout=30) == (135, True)
    proc.join(10)
    assert scan.calls() == 1
    other = CacheState([str(tmp_path)], 5, DirScan(str(tmp_path / "other"), 5))  # another shard count
    assert other.usage() == 100 and cache.usage() == 135
    with pytest.raises(IndexError, match="valid shards are 0 to 3"):
        cache.touch(4)


def _prepare_and_die(ready, scan, shard, reserve) -> None:
    cache = CacheState(["/data"], 8, scan)
    assert cache.mark_preparing(shard, reserve)
    ready.set()
    time.sleep(60)


def test_killed_preparer_does_not_block_others(state_dir, tmp_path):
    scan = DirScan(str(tmp_path / "scan"), 8)
    cache = CacheState(["/data"], 8, scan)
    proc_a = hold_until_killed(_prepare_and_die, scan, 3, 1000)
    proc_b = hold_until_killed(_prepare_and_die, scan, 4, 500)
    assert cache.usage() == 1600
    assert not cache.is_present(3) and not cache.mark_preparing(3, 1)  # a live preparer has it
    kill(proc_a)
    kill(proc_b)
    with open(scan.shard(3), "wb") as out:  # the killed preparer had finished its download
        out.write(b"x" * 55)
    assert cache.is_present(3)
    assert cache.mark_preparing(4, 20)  # taken over at once
    assert cache.usage() == 100 + 55 + 20
    cache.mark_present(4, 12)
    assert cache.usage() == 100 + 55 + 12 and cache.is_present(4)


def _report_live_preparation(scan, shard, results) -> None:
    """Another process's view: whether shard ``shard``'s preparer is alive (its reservation is kept)."""
    cache = CacheState(["/data"], 8, scan)
    results.put((cache.mark_preparing(shard, 1), cache.usage()))


@pytest.mark.parametrize("dropped", ["a second opening", "a pickled copy", "an opening in another thread"])
def test_dropping_another_copy_keeps_this_process_preparation_alive(state_dir, tmp_path, dropped):
    """Closing a mapping closes its descriptor, which drops the process's POSIX locks on the file: a second
    CacheState of the same directories, garbage-collected, once freed the first one's claims, and another
    process then took a live download for a dead one (seen as a cache above its limit)."""
    scan = DirScan(str(tmp_path / "scan"), 8)
    cache = CacheState(["/data"], 8, scan)
    assert cache.mark_preparing(3, 1000)
    if dropped == "a second opening":
        CacheState(["/data"], 8, scan).usage()
    elif dropped == "a pickled copy":
        pickle.loads(pickle.dumps(cache)).usage()
    else:
        opener = threading.Thread(target=lambda: CacheState(["/data"], 8, scan).usage())
        opener.start()
        opener.join()
    gc.collect()
    results = FORK.Queue()
    proc = FORK.Process(target=_report_live_preparation, args=(scan, 3, results))
    proc.start()
    assert results.get(timeout=30) == (False, 1100), "the other process must see shard 3 as being prepared"
    proc.join(10)
    cache.mark_present(3, 10)
    assert cache.usage() == 110


def _next_iteration(state_bytes, results) -> None:
    results.put(pickle.loads(state_bytes).next_iteration(0))


def test_dropping_a_copy_of_an_instance_state_keeps_its_locks(state_dir):
    """The same for the per-instance state: while this process holds worker 0's counter lock, a copy of the
    state attached and dropped here must leave it held, so another process's increment waits."""
    state = InstanceState()
    state_bytes = pickle.dumps(state)
    lock_file, _ = state._state()
    lock_file.acquire(0)  # worker 0's counter lock, as next_iteration(0) holds it
    try:
        copy = pickle.loads(state_bytes)
        copy.next_iteration(1)  # attaches: opens and maps the lock file a second time in this process
        del copy
        gc.collect()
        results = FORK.Queue()
        proc = FORK.Process(target=_next_iteration, args=(state_bytes, results))
        proc.start()
        with pytest.raises(queue.Empty):
            results.get(timeout=1.5)  # it waits for the lock this process still holds
    finally:
        lock_file.release(0)
    assert results.get(timeout=30) == 0
    proc.join(10)
    assert state.next_iteration(0) == 1


def test_abandoned_reservation_is_released_by_usage(state_dir, tmp_path):
    scan = DirScan(str(tmp_path / "scan"), 8)
    cache = CacheState(["/data"], 8, scan)
    kill(hold_until_killed(_prepare_and_die, scan, 6, 900))
    assert cache.usage() == 100 and not cache.is_present(6)


def _die_inside_lock(ready, scan) -> None:
    cache = CacheState(["/data"], 8, scan)
    with cache.lock():
        cache.mark_present(1, 10)
        ready.set()
        time.sleep(60)


def test_killed_mid_update_triggers_rescan(state_dir, tmp_path):
    scan = DirScan(str(tmp_path / "scan"), 8)
    cache = CacheState(["/data"], 8, scan)
    kill(hold_until_killed(_die_inside_lock, scan))
    assert scan.calls() == 1
    cache.mark_present(2, 4)  # takes the header lock at once, sees the dirty flag, rescans
    assert scan.calls() == 2
    assert cache.usage() == 104 and not cache.is_present(1)


def test_coldest_orders_by_access_time(state_dir, tmp_path):
    cache = CacheState([str(tmp_path)], 6, DirScan(str(tmp_path / "scan"), 6))
    for shard in range(5):
        cache.mark_present(shard, 1)
    for shard in (3, 1, 4, 0):
        cache.touch(shard)
    assert cache.coldest(np.arange(6)) == [2, 3, 1, 4, 0]
    assert cache.coldest(np.array([0, 4, 4, 5])) == [4, 0]
    cache.mark_absent(3, 1)
    assert cache.coldest(np.arange(6)) == [2, 1, 4, 0]
    with pytest.raises(IndexError):
        cache.coldest(np.array([6]))


# ---------------------------------------------------------------------------------------------- cleanup


KILLED_OWNER = """
    import numpy as np
    from streaming.base.shared import SharedMemory
    from streaming.dataset.coordination import CacheState, InstanceState, ShardLocks
    state = InstanceState()
    state.shared_file("plan", lambda tmp: open(tmp, "w").write("x"))
    locks = ShardLocks({local!r}, 10)
    held = locks.hold(3)
    held.__enter__()
    cache = CacheState([{local!r}], 10, lambda: (np.zeros(10, np.int64), 0))
    cache.mark_preparing(2, 100)
    block = SharedMemory("000000_locals", create=True, size=64)
    print(state.path)
    print("ready", flush=True)
    import time
    time.sleep(60)
"""


def test_sigkill_leftovers_are_cleaned(state_dir, tmp_path):
    local = str(tmp_path / "local")
    (instance_path,) = start_and_kill(KILLED_OWNER.format(local=local))
    assert os.path.isdir(instance_path) and len(os.listdir(state_dir)) == 5
    assert clean_stale_state() == 5
    assert os.listdir(state_dir) == [] and clean_stale_state() == 0
    start = time.monotonic()
    with ShardLocks(local, 10).try_hold(3) as held:
        assert held is True
    assert time.monotonic() - start < 0.5
    assert SharedMemory("000000_locals", create=True, size=8).size == 8


def test_clean_leaves_live_state_alone(state_dir, tmp_path):
    state = InstanceState()
    locks = ShardLocks(str(tmp_path), 3)
    cache = CacheState([str(tmp_path)], 3, DirScan(str(tmp_path / "scan"), 3))
    block = SharedMemory("mine", size=16)
    with open(os.path.join(state_dir, "unrelated.txt"), "w") as out:
        out.write("not ours")
    before = sorted(os.listdir(state_dir))
    assert clean_stale_state() == 0 and sorted(os.listdir(state_dir)) == before
    state.close()
    block.cleanup()
    del locks, cache
    assert clean_stale_state() == 2
    assert os.listdir(state_dir) == ["unrelated.txt"]


# ---------------------------------------------------------------------------------------------- upstream names


def _read_block(results) -> None:
    results.put(bytes(SharedMemory("blk", create=False).buf[:4]))


def test_named_shared_memory(state_dir):
    block = SharedMemory("/blk", create=True, size=16)
    block.buf[:4] = b"abcd"
    with pytest.raises(FileExistsError):
        SharedMemory("blk", create=True, size=16)
    results = FORK.Queue()
    proc = FORK.Process(target=_read_block, args=(results,))
    proc.start()
    assert results.get(timeout=30) == b"abcd"
    proc.join(10)
    attached = SharedMemory("blk", size=16)
    assert attached.size == 16 and bytes(attached.buf[:4]) == b"abcd"
    attached.cleanup()
    block.cleanup()
    with pytest.raises(FileNotFoundError):
        SharedMemory("blk", create=False)
    with pytest.raises(ValueError, match="positive"):
        SharedMemory("blk", create=True, size=0)

    array = SharedArray((2, 3), np.int32, "arr")
    array[1, 2] = 7
    assert SharedArray((2, 3), np.int32, "arr").numpy()[1].tolist() == [0, 0, 7] and len(array) == 2
    scalar = SharedScalar(np.int64, "scalar")
    scalar.set(41)
    assert SharedScalar(np.int64, "scalar").get() == 41


def test_finaliser_during_registry_update_does_not_deadlock():
    """A garbage-collected instance whose finaliser fires inside a registry update on the same thread."""
    import gc
    import threading

    from streaming.dataset.coordination import InstanceState, lockfile

    def run():
        for _ in range(3):
            state = InstanceState()
            with lockfile._registry_guard:
                del state
                gc.collect()
        gc.collect()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "deadlocked: a finaliser re-entered the registry lock"
    assert not lockfile._deferred_releases
