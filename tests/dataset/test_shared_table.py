"""A large index is decoded once per node: the other processes map the table the first one wrote.

Real processes throughout: ranks started as separate interpreters, a worker started by ``spawn``, a builder
killed by SIGKILL in the middle of writing the table.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import pytest

from streaming.dataset.coordination.cleanup import clean_stale_state
from streaming.dataset.shared_table import SHARE_FROM_BYTES, SharedShardTable, load_table
from tests.helpers import linked_dataset

SAMPLES_PER_SHARD = 10  # in each shard of `linked_dataset`


@pytest.fixture
def state(tmp_path, monkeypatch):
    folder = tmp_path / "state"
    monkeypatch.setenv("STREAMING_STATE_DIR", str(folder))
    return folder


@pytest.fixture
def large(tmp_path):
    root = linked_dataset(tmp_path / "large", 4_000)
    assert (root / "index.json").stat().st_size >= SHARE_FROM_BYTES
    return root


def _tables(state) -> list[str]:
    return sorted(name for name in os.listdir(state) if name.startswith("table-")) if state.exists() else []


def _mapped_tables(pid: int) -> set[tuple[str, str]]:
    """(device:inode, path) of every table file process ``pid`` maps."""
    with open(f"/proc/{pid}/maps") as maps:
        fields = [line.split() for line in maps]
    return {(f[3] + ":" + f[4], f[5]) for f in fields if len(f) > 5 and f[5].endswith("/table.bin")}


_RANK = textwrap.dedent(
    """
    import json, os, sys
    from streaming import StreamingDataset
    from streaming.format.table import ShardTable
    if sys.argv[2] == "map-only":
        def refuse(*args, **kwargs):
            raise AssertionError("this process decoded the index")
        ShardTable.from_bytes = classmethod(refuse)
    dataset = StreamingDataset(local=sys.argv[1], batch_size=4, shuffle=True)
    sample = dataset[len(dataset) - 1]
    maps = [line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith("/table.bin")]
    print(json.dumps({"len": len(dataset), "last": int(sample["n"]), "maps": sorted(set(maps))}), flush=True)
    sys.stdin.readline()  # hold the dataset until the test has looked
    """
)


def _start_rank(local, mode: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _RANK, str(local), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def test_the_second_process_of_a_node_maps_the_table_the_first_one_decoded(state, large):
    first = _start_rank(large, "decode")
    second = None
    try:
        seen_first = json.loads(first.stdout.readline())
        # The second process may not decode: if it did, its ShardTable.from_bytes fails it.
        second = _start_rank(large, "map-only")
        seen_second = json.loads(second.stdout.readline())
        assert seen_first["len"] == seen_second["len"] == 4_000 * SAMPLES_PER_SHARD
        assert seen_first["last"] == seen_second["last"] == SAMPLES_PER_SHARD - 1
        assert len(seen_first["maps"]) == 1 and seen_second["maps"] == seen_first["maps"]
        assert _mapped_tables(first.pid) == _mapped_tables(second.pid)
        assert len(_tables(state)) == 2  # table-<key>/ and its lock
    finally:
        for process in (first, second):
            if process is not None:
                process.communicate("\n", timeout=60)
    # The last process to let go of it removed it.
    assert _tables(state) == []


def test_a_small_index_is_decoded_in_place(state, tmp_path):
    small = linked_dataset(tmp_path / "small", 20)
    table = load_table(str(small / "index.json"), str(small))
    assert len(table) == 20 and not isinstance(table, SharedShardTable)
    assert _tables(state) == []


def _grow(root, shards: int) -> None:
    """Rewrite the index in place with the first ``shards`` entries repeated to that count."""
    index = json.loads((root / "index.json").read_text())
    entries = index["shards"]
    index["shards"] = [entries[number % len(entries)] for number in range(shards)]
    with open(root / "index.json", "r+") as sink:
        sink.truncate(0)
        sink.write(json.dumps(index))


def test_a_rewritten_index_is_decoded_again_and_a_pickled_table_of_the_old_one_refuses(state, large):
    path, root = str(large / "index.json"), str(large)
    before = load_table(path, root)
    assert isinstance(before, SharedShardTable) and len(before) == 4_000
    pickled = pickle.dumps(before)
    _grow(large, 4_100)
    after = load_table(path, root)
    assert len(after) == 4_100 and after.reopen[2] != before.reopen[2]
    with pytest.raises(RuntimeError, match=r"index .*index\.json changed while a dataset over it was in use"):
        pickle.loads(pickled)


def _entries_in_spawned_worker(pickled: bytes) -> tuple[int, list[dict], set[str]]:
    table = pickle.loads(pickled)
    maps = {line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith("/table.bin")}
    return len(table), [table.entry(number) for number in (0, len(table) - 1)], maps


def test_a_spawned_worker_maps_the_table_rather_than_receiving_a_copy(state, large):
    table = load_table(str(large / "index.json"), str(large))
    pickled = pickle.dumps(table)
    # The table's arrays are megabytes; what a worker receives is where to map them.
    assert len(pickled) < 1_000 < table.files["raw_data"].names.nbytes
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        count, entries, maps = pool.apply(_entries_in_spawned_worker, (pickled,))
    assert count == len(table)
    assert entries == [table.entry(0), table.entry(len(table) - 1)]
    assert maps == {path for _, path in _mapped_tables(os.getpid())}


_KILLED_BUILDER = textwrap.dedent(
    """
    import os, signal, sys
    import streaming.dataset.shared_table as shared
    def half_then_killed(table, sink, **kwargs):
        sink.write(b"MDSTABLE" + b"\\0" * 4096)
        sink.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    shared.write_table = half_then_killed
    shared.load_table(sys.argv[1], sys.argv[2])
    """
)


def test_a_table_left_by_a_killed_process_is_removed_by_the_cleanup(state, large):
    path, root = str(large / "index.json"), str(large)
    script = "import os, signal, sys; from streaming.dataset.shared_table import load_table; "
    script += "table = load_table(sys.argv[1], sys.argv[2]); os.kill(os.getpid(), signal.SIGKILL)"
    assert subprocess.run([sys.executable, "-c", script, path, root]).returncode == -9
    assert len(_tables(state)) == 2
    assert clean_stale_state() >= 1
    assert _tables(state) == []


def test_a_builder_killed_mid_write_leaves_nothing_the_next_process_trips_on(state, large):
    path, root = str(large / "index.json"), str(large)
    killed = subprocess.run([sys.executable, "-c", _KILLED_BUILDER, path, root])
    assert killed.returncode == -9
    (folder,) = [name for name in _tables(state) if not name.endswith(".lock")]
    assert [name for name in os.listdir(state / folder) if name.endswith(".tmp")]  # its half-written file
    table = load_table(path, root)
    assert len(table) == 4_000 and table.entry(3_999)["raw_data"]["basename"] == "shard.003999.mds"
    assert os.listdir(state / folder) == ["table.bin"]
    del table
    gc.collect()
    assert _tables(state) == []


def test_a_damaged_table_file_is_replaced_by_a_fresh_decode(state, large, caplog):
    path, root = str(large / "index.json"), str(large)
    table = load_table(path, root)
    expected = [table.entry(number) for number in range(0, 4_000, 97)]
    (folder,) = [name for name in _tables(state) if not name.endswith(".lock")]
    damaged = state / folder / "damaged"
    with open(damaged, "wb") as sink:
        sink.write(b"MDSTABLE" + b"\xff" * 100)
    # Replaced by rename, as a build does: the mapping the first table holds keeps its own file.
    os.replace(damaged, state / folder / "table.bin")
    again = load_table(path, root)
    assert "decoding the index again" in caplog.text
    assert [again.entry(number) for number in range(0, 4_000, 97)] == expected
    assert [table.entry(number) for number in range(0, 4_000, 97)] == expected


def test_without_a_usable_state_folder_the_index_is_decoded_here(tmp_path, monkeypatch, large):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("STREAMING_STATE_DIR", str(blocked / "state"))
    table = load_table(str(large / "index.json"), str(large))
    assert len(table) == 4_000 and not isinstance(table, SharedShardTable)
    shutil.rmtree(tmp_path / "large")


def _record_maps(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: runs after the worker unpickled the dataset; notes the tables it maps."""
    maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith("/table.bin")})
    with open(os.path.join(os.environ["TABLE_MAPS_OUT"], f"worker{worker_id}.json"), "w") as sink:
        json.dump(maps, sink)


def _first_values(large, context: str | None, count: int = 64) -> list[int]:
    from torch.utils.data import DataLoader

    from streaming import StreamingDataset

    dataset = StreamingDataset(local=str(large), batch_size=8, shuffle=False)
    loader = DataLoader(
        dataset, batch_size=8, num_workers=2, multiprocessing_context=context, worker_init_fn=_record_maps
    )
    values: list[int] = []
    for batch in loader:
        values.extend(int(n) for n in batch["n"])
        if len(values) >= count:
            return values[:count]
    raise AssertionError("the epoch ended early")


def test_a_dataloader_with_spawned_workers_reads_through_the_mapped_table(state, large, tmp_path, monkeypatch):
    monkeypatch.setenv("TABLE_MAPS_OUT", str(tmp_path))
    spawned = _first_values(large, "spawn")
    maps = [json.loads((tmp_path / f"worker{n}.json").read_text()) for n in range(2)]
    assert maps[0] == maps[1] and len(maps[0]) == 1 and maps[0][0].startswith(str(state))
    assert spawned == _first_values(large, "fork")
