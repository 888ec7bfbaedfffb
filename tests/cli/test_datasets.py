"""`inspect`, `verify`, `rebuild-index`, `merge-index`, `cp`/`sync` and `vacuum` on local disk and on S3."""

from __future__ import annotations

import json
import os
import time

import pytest

from streaming import vacuum
from streaming.format.index import read_index
from streaming.storage.dataset_root import DatasetRoot
from tests.cli.conftest import run_cli
from tests.cli.data import COLUMNS, write_json, write_mds


def _put(root: str, relative: str, data: bytes) -> None:
    DatasetRoot(root).write_bytes(relative, data)


def _shard_names(root: str) -> list[str]:
    return [name for name in DatasetRoot(root).list_relative() if name.endswith(".zstd")]


# -- inspect --------------------------------------------------------------------------------------------------------
def test_inspect_reports_columns_sizes_and_samples(store):
    root = store("ds")
    write_mds(root)
    code, doc, _ = run_cli("inspect", root, "--json", "--samples", "2")
    assert code == 0
    assert doc["columns"] == COLUMNS
    assert doc["samples"] == 300 and doc["shards"] > 5
    assert doc["compression"] == ["zstd"] and doc["hashes"] == ["sha1", "xxh64"]
    assert doc["bytes_stored"] < doc["bytes_raw"] and doc["compression_ratio"] > 1
    assert doc["shard_samples"]["min"] <= doc["shard_samples"]["median"] <= doc["shard_samples"]["max"]
    assert [s["text"] for s in doc["sample_preview"]] == ["'sample 0'", "'sample 1'"]
    code, text, _ = run_cli("inspect", root)
    assert code == 0 and "ndarray:int32" in text and "ratio" in text and "sample 1" in text


# -- verify ---------------------------------------------------------------------------------------------------------
def test_verify_clean_dataset(store):
    root = store("ds")
    write_mds(root)
    code, doc, _ = run_cli("verify", root, "--json")
    assert code == 0 and doc["ok"] and doc["problems"] == []
    assert doc["samples_decoded"] == 300 and doc["shards_checked"] == doc["shards"]
    code, doc, _ = run_cli("verify", root, "--json", "--sample", "2")
    assert code == 0 and doc["shards_checked"] == 2


def test_verify_lists_every_problem(store):
    root = store("ds")
    write_mds(root)
    location = DatasetRoot(root)
    first, second, third = _shard_names(root)[:3]
    data = location.read_bytes(first)
    _put(root, first, data[: len(data) // 2])  # truncated
    wrong = bytearray(location.read_bytes(second))
    wrong[-1] ^= 0xFF
    _put(root, second, bytes(wrong))  # same size, wrong hash
    location.storage.delete(location.child(third))  # missing
    _put(root, "leftover/shard.00000.mds", b"x" * 10)  # unreferenced
    code, doc, _ = run_cli("verify", root, "--json")
    assert code == 1 and not doc["ok"]
    by_file: dict[str, str] = {}
    for problem in doc["problems"]:
        by_file[problem["file"]] = by_file.get(problem["file"], "") + problem["problem"] + "; "
    assert "the index says" in by_file[first] and "bytes" in by_file[first]
    assert "sha1 is" in by_file[second]
    assert by_file[third].startswith("missing")
    assert by_file["leftover/shard.00000.mds"] == "not referenced by the index; "
    code, text, _ = run_cli("verify", root)
    assert code == 1 and "5 problem(s)" in text and "vacuum" in text


def test_verify_finds_header_disagreement(tmp_path):
    root = str(tmp_path / "ds")
    write_mds(root, compression=None, hashes=())
    index = json.loads(open(os.path.join(root, "index.json")).read())
    index["shards"][0]["column_encodings"][0] = "str"  # the index no longer matches the shard header
    with open(os.path.join(root, "index.json"), "w") as stream:
        json.dump(index, stream)
    code, doc, _ = run_cli("verify", root, "--json")
    assert code == 1
    assert any("header disagrees" in p["problem"] and "column_encodings" in p["problem"] for p in doc["problems"])


def test_verify_missing_or_broken_index(store):
    root = store("ds")
    write_mds(root)
    location = DatasetRoot(root)
    location.storage.delete(location.child("index.json"))
    code, doc, _ = run_cli("verify", root, "--json")
    assert code == 1 and doc["problems"][0]["file"] == "index.json" and "rebuild-index" in doc["problems"][0]["hint"]
    _put(root, "index.json", b"{not json")
    code, doc, _ = run_cli("verify", root, "--json")
    assert code == 1 and "unreadable" in doc["problems"][0]["problem"]


# -- rebuild-index --------------------------------------------------------------------------------------------------
def test_rebuild_index_reproduces_the_lost_index_exactly(store):
    root = store("ds")
    write_mds(root)
    location = DatasetRoot(root)
    original = location.read_bytes("index.json")
    location.storage.delete(location.child("index.json"))
    code, doc, _ = run_cli("rebuild-index", root, "--json")
    assert code == 0 and doc["written"] and doc["skipped"] == [] and doc["inferred"] == []
    assert location.read_bytes("index.json") == original
    assert run_cli("verify", root)[0] == 0


def test_rebuild_index_of_json_shards_and_uncompressed_mds(tmp_path):
    for writer, name in ((write_json, "json"), (lambda out: write_mds(out, compression=None), "mds")):
        root = str(tmp_path / name)
        writer(root)
        path = os.path.join(root, "index.json")
        original = open(path, "rb").read()
        os.remove(path)
        assert run_cli("rebuild-index", root, "--quiet")[0] == 0
        assert open(path, "rb").read() == original


def test_rebuild_index_refuses_a_valid_index_without_force(store):
    root = store("ds")
    write_mds(root)
    code, _, err = run_cli("rebuild-index", root)
    assert code == 2 and "--force" in err
    code, doc, _ = run_cli("rebuild-index", root, "--force", "--json")
    assert code == 0 and doc["written"]
    assert DatasetRoot(root).read_bytes("index.json.bak") == DatasetRoot(root).read_bytes("index.json")


def test_rebuild_index_replaces_a_damaged_index_and_leaves_out_a_truncated_shard(store):
    root = store("ds")
    write_mds(root)
    location = DatasetRoot(root)
    samples_before = sum(s["samples"] for s in read_index(location))
    _put(root, "index.json", b"garbage")
    victim = _shard_names(root)[1]
    data = location.read_bytes(victim)
    from streaming.format.compression import compress, decompress

    raw = decompress("zstd", data)
    _put(root, victim, compress("zstd", raw[:-7]))  # decompresses fine, but the shard inside is truncated
    code, doc, _ = run_cli("rebuild-index", root, "--json")
    assert code == 1 and len(doc["skipped"]) == 1 and victim in doc["skipped"][0] and "truncated" in doc["skipped"][0]
    rebuilt = read_index(location)
    assert victim not in {s["zip_data"]["basename"] for s in rebuilt}
    assert samples_before - doc["samples"] == int.from_bytes(raw[:4], "little")
    assert location.read_bytes("index.json.bak") == b"garbage"


def test_rebuild_index_with_columns_when_the_header_is_unreadable(tmp_path):
    root = str(tmp_path / "ds")
    write_mds(root, count=20, compression=None, hashes=())
    path = os.path.join(root, "index.json")
    original = json.load(open(path))
    os.remove(path)
    shard = os.path.join(root, "shard.00000.mds")
    data = bytearray(open(shard, "rb").read())
    count = int.from_bytes(data[:4], "little")
    start = 4 + 4 * (count + 1)
    data[start] = ord("!")  # break the JSON settings in the header
    open(shard, "wb").write(bytes(data))
    code, doc, _ = run_cli("rebuild-index", root, "--json")
    assert code == 1 and "--columns" in doc["skipped"][0]
    spec = ",".join(f"{k}:{v}" for k, v in COLUMNS.items())
    code, doc, _ = run_cli("rebuild-index", root, "--json", "--columns", spec)
    assert code == 0 and any("--columns" in text for text in doc["inferred"])
    rebuilt = json.load(open(path))["shards"]
    assert [s["samples"] for s in rebuilt] == [s["samples"] for s in original["shards"]]
    assert rebuilt[0]["column_names"] == original["shards"][0]["column_names"]
    from streaming import LocalDataset

    assert LocalDataset(root)[0]["text"] == "sample 0"


# -- merge-index ----------------------------------------------------------------------------------------------------
def test_merge_index_both_forms(store):
    root = store("ds")
    write_mds(root + "/part-0", count=30)
    write_mds(root + "/part-1", count=40)
    code, doc, _ = run_cli("merge-index", root, "--json")
    assert code == 0 and doc["samples"] == 70
    assert run_cli("verify", root, "--json")[1]["samples_decoded"] == 70
    DatasetRoot(root).storage.delete(DatasetRoot(root).child("index.json"))
    code, doc, _ = run_cli("merge-index", root, root + "/part-1/index.json", "--json")
    assert code == 0 and doc["samples"] == 40


# -- cp / sync ------------------------------------------------------------------------------------------------------
def test_cp_between_stores_is_verified_resumable_and_writes_the_index_last(store, tmp_path):
    source = str(tmp_path / "source")
    write_mds(source)
    target = store("copy")
    code, doc, _ = run_cli("cp", source, target, "--json")
    assert code == 0 and doc["copied"] == doc["files"] and doc["skipped"] == 0
    assert DatasetRoot(target).read_bytes("index.json") == DatasetRoot(source).read_bytes("index.json")
    assert run_cli("verify", target)[0] == 0
    # Interrupted copy: one file lost, one damaged (same size); a second run copies only those.
    location = DatasetRoot(target)
    first, second = _shard_names(target)[:2]
    location.storage.delete(location.child(first))
    _put(target, second, DatasetRoot(target).read_bytes(second)[:-3] + b"abc")
    code, doc, _ = run_cli("cp", source, target, "--json")
    expected_recopied = 1 if store("x").startswith("s3://") else 2  # a remote destination is checked by size only
    assert code == 0 and doc["copied"] == expected_recopied and doc["skipped"] == doc["files"] - expected_recopied
    back = str(tmp_path / "back")
    code, _, err = run_cli("cp", target, back, "--quiet")
    if expected_recopied == 2:
        assert code == 0 and run_cli("verify", back)[0] == 0
    else:  # the damaged file stayed on S3 (same size); copying from there checks its hashes and refuses
        assert code == 1 and second in err and "does not match the hashes" in err


def test_cp_refuses_a_damaged_source_and_sync_deletes_extra_files(tmp_path, store):
    source = str(tmp_path / "source")
    write_mds(source)
    target = store("copy")
    _put(target, "stale/old.bin", b"old")
    code, doc, _ = run_cli("sync", source, target, "--json")
    assert code == 0 and doc["deleted"] == ["stale/old.bin"]
    name = _shard_names(source)[0]
    with open(os.path.join(source, name), "r+b") as stream:
        stream.write(b"\0\0\0\0")
    code, _, err = run_cli("cp", source, store("copy2"))
    assert code == 1 and "does not match the hashes" in err and "verify" in err
    assert DatasetRoot(store("copy2")).size("index.json") is None  # nothing published


# -- vacuum ---------------------------------------------------------------------------------------------------------
def _age(root: str, relative: str, seconds: float) -> None:
    path = os.path.join(root, *relative.split("/"))
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_vacuum_deletes_only_old_unreferenced_files(tmp_path):
    root = str(tmp_path / "ds")
    write_mds(root)
    referenced = set(DatasetRoot(root).list_relative())
    for name in referenced:
        _age(root, name, 30 * 86400)  # old, but referenced: never deleted
    _put(root, "crashed/shard.00000.mds", b"x" * 100)
    _put(root, "crashed/index.json", b'{"version": 2, "shards": []}')
    _put(root, "shard.00000.mds.zstd.tmp", b"partial")
    _put(root, "inflight/shard.00000.mds", b"y")
    for name in ("crashed/shard.00000.mds", "shard.00000.mds.zstd.tmp"):
        _age(root, name, 8 * 86400)
    dry = vacuum(root, "7d", dry_run=True)
    assert dry.deleted == ["crashed/shard.00000.mds", "shard.00000.mds.zstd.tmp"]
    assert set(DatasetRoot(root).list_relative()) >= referenced | set(dry.deleted)
    result = vacuum(root, retention="7d")
    assert result.deleted == dry.deleted and result.deleted_bytes == 107
    assert "inflight/shard.00000.mds" in result.kept_recent
    left = set(DatasetRoot(root).list_relative())
    assert referenced <= left and "inflight/shard.00000.mds" in left and "crashed/shard.00000.mds" not in left
    assert run_cli("verify", root, "--json")[1]["samples_decoded"] == 300
    with pytest.raises(ValueError, match="retention_check=False"):
        vacuum(root, "1h")


def test_vacuum_command_on_each_store(store):
    root = store("ds")
    write_mds(root)
    _put(root, "orphan/shard.00009.mds", b"z" * 10)
    code, doc, _ = run_cli("vacuum", root, "--retention", "1h", "--no-retention-check", "--json")
    assert code == 0 and doc["deleted"] == [] and doc["kept_recent"] == ["orphan/shard.00009.mds"]
    code, doc, _ = run_cli("vacuum", root, "--retention", "0", "--no-retention-check", "--dry-run", "--json")
    assert code == 0 and doc["deleted"] == ["orphan/shard.00009.mds"] and doc["dry_run"]
    assert DatasetRoot(root).size("orphan/shard.00009.mds") == 10
    code, doc, _ = run_cli("vacuum", root, "--retention", "0", "--no-retention-check", "--json")
    assert code == 0 and doc["deleted"] == ["orphan/shard.00009.mds"]
    assert DatasetRoot(root).size("orphan/shard.00009.mds") is None
    assert run_cli("verify", root)[0] == 0
    code, _, err = run_cli("vacuum", root, "--retention", "1d")
    assert code == 2 and "--no-retention-check" in err
