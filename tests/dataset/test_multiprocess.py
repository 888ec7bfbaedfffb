"""Real processes: ranks and DataLoader workers see exactly the single-process plan, and nothing leaks on SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from streaming import MDSWriter
from streaming.dataset.batching import generate_work
from streaming.dataset.world import World

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUM_SAMPLES = 300
BATCH = 4

RANK_SCRIPT = textwrap.dedent("""
    import json, sys
    from torch.utils.data import DataLoader
    from streaming import StreamingDataset
    local, remote, out, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ds = StreamingDataset(local=local, remote=remote or None, shuffle=True, batch_size=%(batch)d,
                          num_canonical_nodes=4, shuffle_block_size=50)
    loader = DataLoader(ds, batch_size=%(batch)d, num_workers=2)
    result = []
    for epoch in range(epochs):
        result.append([int(i) for batch in loader for i in batch["id"]])
    with open(out, "w") as f:
        json.dump(result, f)
""") % {"batch": BATCH}


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("remote"))
    with MDSWriter(out=path, columns={"id": "int", "pad": "bytes"}, size_limit=1000, compression="zstd") as w:
        for i in range(NUM_SAMPLES):
            w.write({"id": i, "pad": bytes(20)})
    return path


def _shard_sizes(remote: str) -> list[int]:
    with open(os.path.join(remote, "index.json")) as f:
        return [shard["samples"] for shard in json.load(f)["shards"]]


def _expected(remote: str, num_nodes: int, ranks_per_node: int, workers: int, epoch: int) -> list[list[int]]:
    """Per global rank, the order a DataLoader yields: worker batches round-robin."""
    from streaming.dataset.batching import PlanInputs

    sizes = _shard_sizes(remote)
    plan = PlanInputs(
        sizes, [len(sizes)], [NUM_SAMPLES], [1.0], NUM_SAMPLES, BATCH, 4, shuffle=True, shuffle_block_size=50
    )
    work = generate_work("random", plan, World(num_nodes, ranks_per_node, workers, 0), epoch, 0)
    orders = []
    for node in range(num_nodes):
        for rank in range(ranks_per_node):
            order = []
            for step in range(work.shape[3] * workers):
                batch = work[node, rank, step % workers, step // workers]
                order.extend(int(i) for i in batch if i >= 0)
            orders.append(order)
    return orders


def _env(rank: int, world_size: int, local_world_size: int) -> dict[str, str]:
    env = dict(
        os.environ,
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(local_world_size),
        LOCAL_RANK=str(rank % local_world_size),
        PYTHONPATH=ROOT,
    )
    env.pop("MASTER_ADDR", None)
    return env


def _run_ranks(tmp_path, remote, num_nodes, ranks_per_node, epochs=2):
    procs, outs = [], []
    world_size = num_nodes * ranks_per_node
    for rank in range(world_size):
        node = rank // ranks_per_node
        local = str(tmp_path / f"node{node}")
        out = str(tmp_path / f"rank{rank}.json")
        outs.append(out)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", RANK_SCRIPT, local, remote, out, str(epochs)],
                env=_env(rank, world_size, ranks_per_node),
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
    results = []
    for out in outs:
        with open(out) as f:
            results.append(json.load(f))
    return results


def test_remote_has_many_shards(remote):
    assert len(_shard_sizes(remote)) > 10 and sum(_shard_sizes(remote)) == NUM_SAMPLES


def test_two_ranks_two_workers_match_single_process_plan(tmp_path, remote):
    results = _run_ranks(tmp_path, remote, 1, 2)
    for epoch in range(2):
        expected = _expected(remote, 1, 2, 2, epoch)
        got = [per_rank[epoch] for per_rank in results]
        assert got == expected
        assert sorted(got[0] + got[1]) == list(range(NUM_SAMPLES))


def test_two_nodes_two_ranks_separate_local_dirs(tmp_path, remote):
    results = _run_ranks(tmp_path, remote, 2, 2, epochs=1)
    expected = _expected(remote, 2, 2, 2, 0)
    assert [per_rank[0] for per_rank in results] == expected
    assert sorted(sum((r[0] for r in results), [])) == list(range(NUM_SAMPLES))
    assert os.listdir(tmp_path / "node0") and os.listdir(tmp_path / "node1")


def test_sigkill_mid_epoch_leaves_nothing_and_restarts(tmp_path, remote):
    from streaming.dataset.coordination import clean_stale_state, state_root

    before = set(os.listdir(state_root()))
    script = textwrap.dedent("""
        import sys, time
        from torch.utils.data import DataLoader
        from streaming import StreamingDataset
        ds = StreamingDataset(local=sys.argv[1], remote=sys.argv[2], shuffle=True, batch_size=4)
        for i, batch in enumerate(DataLoader(ds, batch_size=4, num_workers=2)):
            if i == 3:
                print("running", flush=True)
                time.sleep(60)
    """)
    local = str(tmp_path / "killed")
    proc = subprocess.Popen(
        [sys.executable, "-c", script, local, remote],
        env=_env(0, 1, 1),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout.readline().strip() == "running"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(0.5)
    clean_stale_state()
    assert set(os.listdir(state_root())) - before == set()
    again = subprocess.run(
        [sys.executable, "-c", RANK_SCRIPT, local, remote, str(tmp_path / "again.json"), "1"],
        env=_env(0, 1, 1),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    with open(tmp_path / "again.json") as f:
        assert sorted(json.load(f)[0]) == list(range(NUM_SAMPLES))
    leftovers = [name for name in os.listdir(os.path.join(local)) if name.endswith(".tmp") or ".tmp." in name]
    assert leftovers == []
