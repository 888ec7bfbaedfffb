"""Issue 24, items 5 and 6: every decompression bounded (command line included), planning memory bounded up
front, and the package's own errors for what used to escape as RecursionError or TypeError.

Each test failed on the code before issue 24 (see README.md). The plan test runs in a forked child whose
address space is capped, so that on old code it fails with a MemoryError instead of exhausting the machine.
"""

from __future__ import annotations

import json
import os
import resource

import pytest

from streaming import JSONWriter, LocalDataset, MDSWriter, StreamingDataset
from streaming.dataset.errors import PlanMemoryError
from streaming.format.compression import compress
from streaming.format.errors import ShardCorruptError
from streaming.format.index import MAX_SHARD_FILE_BYTES
from tests.cli.conftest import run_cli
from tests.security.conftest import in_child
from tests.security.test_bounded import _peak_rss_growth

BOMB_BYTES = 256 << 20  # zeros that compress to a few KB


def _index(path: str) -> dict:
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)


def _write_index(path: str, index: dict) -> None:
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump(index, f)


def _bombed(path: str) -> dict:
    """A zstd dataset whose compressed shard is replaced by a bomb; the index declares the real sizes."""
    with MDSWriter(out=path, columns={"x": "bytes"}, compression="zstd") as writer:
        writer.write({"x": b"a"})
    index = _index(path)
    entry = index["shards"][0]
    bomb = compress("zstd", bytes(BOMB_BYTES))
    with open(os.path.join(path, entry["zip_data"]["basename"]), "wb") as f:
        f.write(bomb)
    entry["zip_data"]["bytes"] = len(bomb)
    _write_index(path, index)
    return entry


def test_verify_decompresses_no_more_than_the_index_declares(tmp_path):
    ds = str(tmp_path / "ds")
    entry = _bombed(ds)
    growth, outcome = _peak_rss_growth(lambda: print(run_cli("verify", ds, "--json")))
    assert growth < 64 << 20, f"verify grew the process by {growth >> 20} MiB"
    assert outcome == "ok"
    code, report, _ = run_cli("verify", ds, "--json")
    assert code == 1 and any(
        problem["file"] == entry["zip_data"]["basename"] and "decompress" in problem["problem"]
        for problem in report["problems"]
    ), report


def test_rebuild_index_decompresses_no_more_than_the_shard_declares(tmp_path):
    ds = str(tmp_path / "ds")
    entry = _bombed(ds)
    os.remove(os.path.join(ds, "index.json"))
    growth, outcome = _peak_rss_growth(lambda: run_cli("rebuild-index", ds))
    assert growth < 64 << 20, f"rebuild-index grew the process by {growth >> 20} MiB"
    assert outcome == "ok"
    code, report, _ = run_cli("rebuild-index", ds, "--json")
    assert code == 1 and entry["zip_data"]["basename"] in report["skipped"][0], report


def test_sample_counts_the_files_cannot_hold_are_refused_before_planning(tmp_path):
    """The issue's index: 16 shards of a few bytes declaring 2^30 samples each (a 128 GiB plan)."""
    ds = str(tmp_path / "ds")
    with MDSWriter(out=ds, columns={"x": "int"}) as writer:
        writer.write({"x": 1})
    index = _index(ds)
    index["shards"] = [dict(index["shards"][0], samples=1 << 30) for _ in range(16)]
    for entry in index["shards"]:  # exactly what the old check let through: 4 bytes per sample
        entry["raw_data"] = dict(entry["raw_data"], bytes=4 << 30)
    _write_index(ds, index)
    assert os.path.getsize(os.path.join(ds, "index.json")) < 8 << 10
    with pytest.raises(ValueError, match=r"shard 0: a raw shard file of 4294967296 bytes is impossible"):
        StreamingDataset(local=ds, batch_size=1)
    for entry in index["shards"]:  # under 4 GiB: room for the offsets, not for 8-byte samples as well
        entry["raw_data"]["bytes"] = MAX_SHARD_FILE_BYTES
    _write_index(ds, index)
    with pytest.raises(ValueError, match=r"shard 0: 1073741824 samples cannot fit in 4294967295 bytes"):
        LocalDataset(ds)


@pytest.mark.parametrize("shards", [3, 40])  # checked one by one, and all at once with numpy
def test_the_first_shard_that_cannot_hold_its_samples_is_named(tmp_path, shards):
    ds = str(tmp_path / "ds")
    with MDSWriter(out=ds, columns={"x": "int", "s": "str"}) as writer:
        writer.write({"x": 1, "s": "a"})
    index = _index(ds)
    entry = index["shards"][0]
    fits = (entry["raw_data"]["bytes"] - 8) // 16  # 4 bytes of offset, 8 of int, 4 of string length each
    index["shards"] = [dict(entry, samples=fits) for _ in range(shards)]
    index["shards"][-2] = dict(entry, samples=fits + 1)
    _write_index(ds, index)
    with pytest.raises(ValueError, match=rf"shard {shards - 2}: {fits + 1} samples cannot fit"):
        LocalDataset(ds)


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))


def _declaring_most_samples(tmp_path) -> tuple[str, int]:
    """A dataset of 16 shards declaring as many samples as 4 GiB files can hold (the files hold one)."""
    ds = str(tmp_path / "ds")
    with MDSWriter(out=ds, columns={"x": "int"}) as writer:
        writer.write({"x": 1})
    index = _index(ds)
    most = (MAX_SHARD_FILE_BYTES - 8) // 12  # 4 bytes of offset and 8 of value each
    entry = dict(index["shards"][0], samples=most)
    entry["raw_data"] = dict(entry["raw_data"], bytes=MAX_SHARD_FILE_BYTES)
    index["shards"] = [entry] * 16
    _write_index(ds, index)
    return ds, 16 * most


def _first_sample_capped(ds: str, **kwargs: object) -> object:
    # Capped a few GiB above what the process maps now: old code fails with a MemoryError, not the machine.
    cap = _vm_size() + (4 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    return next(iter(StreamingDataset(local=ds, batch_size=1, **kwargs)))


def test_the_plan_memory_is_estimated_before_it_is_allocated(tmp_path):
    """A plan built whole (two canonical nodes) of billions of declared samples is refused, not allocated."""
    ds, declared = _declaring_most_samples(tmp_path)
    outcome = in_child(lambda: _first_sample_capped(ds, num_canonical_nodes=2), timeout=120)
    assert outcome.kind == "error" and outcome.detail.startswith(PlanMemoryError.__name__), outcome
    assert f"covers {declared} samples" in outcome.detail, outcome


def test_a_streamed_share_of_billions_of_declared_samples_allocates_no_plan(tmp_path):
    """A reader alone on its node streams its share: under the same cap it gets as far as the shard, whose
    truncation is the error."""
    ds, _ = _declaring_most_samples(tmp_path)
    outcome = in_child(lambda: _first_sample_capped(ds), timeout=120)
    assert outcome.kind == "error" and outcome.detail.startswith("ShardCorruptError"), outcome
    assert "shard.00000.mds" in outcome.detail and "truncated" in outcome.detail, outcome


def test_a_json_sample_nested_200k_deep_is_a_clean_error_naming_the_file(tmp_path):
    ds = str(tmp_path / "ds")
    depth = 200_000
    with JSONWriter(out=ds, columns={"x": "str"}) as writer:
        writer.write({"x": "a" * (2 * depth)})
    entry = _index(ds)["shards"][0]
    path = os.path.join(ds, entry["raw_data"]["basename"])
    with open(path, "rb") as f:
        line = f.read()
    nested = b"[" * depth + b"]" * depth
    with open(path, "wb") as f:  # same length, so the offsets and the index still agree
        f.write(nested + b" " * (len(line) - 1 - len(nested)) + line[-1:])
    with pytest.raises(ShardCorruptError, match=rf"{entry['raw_data']['basename']}, sample 0: .*nests too deeply"):
        LocalDataset(ds)[0]


def test_a_format_that_is_not_a_name_is_an_error_naming_the_index(tmp_path):
    ds = str(tmp_path / "ds")
    with MDSWriter(out=ds, columns={"x": "int"}) as writer:
        writer.write({"x": 1})
    index = _index(ds)
    index["shards"][0]["format"] = ["mds"]
    _write_index(ds, index)
    for read in (lambda: LocalDataset(ds)[0], lambda: StreamingDataset(local=ds, batch_size=1)[0]):
        with pytest.raises(ValueError, match=r"index.json, shard 0: format must be the name of a shard format"):
            read()
    code, _, err = run_cli("inspect", ds)
    assert code == 1 and "format must be the name" in err, err
