"""`mds-streaming incremental`: the scheduled job as a shell command, on real delta-rs tables.

Judged by what the dataset holds afterwards (read back with `LocalDataset`) against the table's own rows at that
version, by the commit log's audit, and by the exit codes of the command line's contract (2 for a usage error).
"""

from __future__ import annotations

import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from streaming import LocalDataset
from streaming._extras import install_command
from tests.cli.conftest import run_cli

FEED = {"delta.enableChangeDataFeed": "true"}


def _table(path: str, rows: int) -> None:
    ids = pa.array(range(rows), pa.int64())
    write_deltalake(path, pa.table({"id": ids, "name": [f"user {i}" for i in range(rows)]}), configuration=FEED)


def test_mirror_runs_remove_deleted_rows_and_replace_updated_ones(tmp_path):
    table, out = str(tmp_path / "users"), str(tmp_path / "users_mds")
    _table(table, 200)
    code, first, err = run_cli("incremental", table, out, "--mode", "mirror", "--key", "id", "--json")
    assert code == 0, err
    assert (first["mode"], first["version"], first["samples"]) == ("mirror", 0, 200)

    DeltaTable(table).delete("id = 42")
    DeltaTable(table).update(new_values={"name": "relabelled"}, predicate="id = 7")
    code, second, err = run_cli("incremental", table, out, "--mode", "mirror", "--key", "id", "--json")
    assert code == 0, err
    assert (second["previous_version"], second["version"], second["removed"], second["samples"]) == (0, 2, 2, 1)
    held = {sample["id"]: sample["name"] for sample in LocalDataset(out)}
    assert sorted(held) == [i for i in range(200) if i != 42] and held[7] == "relabelled"

    code, inspected, err = run_cli("inspect", out, "--json", "--samples", "0")
    assert code == 0, err
    assert list(inspected["source_versions"].values()) == [2], inspected
    newest = inspected["audit"][-1]
    assert (newest["table_version"], len(newest["removed"]), len(newest["replaced"])) == (2, 1, 1), newest


def test_append_runs_append_what_is_new_and_say_what_stays(tmp_path):
    table, out = str(tmp_path / "events"), str(tmp_path / "events_mds")
    _table(table, 50)
    assert run_cli("incremental", table, out, "--quiet")[0] == 0
    DeltaTable(table).delete("id < 5")
    write_deltalake(table, pa.table({"id": pa.array([100], pa.int64()), "name": ["new"]}), mode="append")
    code, text, err = run_cli("incremental", table, out, "--quiet")
    assert code == 0, err
    assert "appended 1 row(s)" in text and "5 row(s) the table deleted or updated stay" in text, text
    assert len(LocalDataset(out)) == 51


def test_a_checkpoint_taken_before_an_append_run_is_refused_mid_epoch(tmp_path):
    """Appends change the epoch's order too: a mid-epoch checkpoint of the version before is refused."""
    from streaming import StreamingDataset

    table, out = str(tmp_path / "events"), str(tmp_path / "events_mds")
    _table(table, 50)
    assert run_cli("incremental", table, out, "--quiet")[0] == 0
    before = StreamingDataset(local=out, batch_size=1, shuffle=True)
    iterator = iter(before)
    for _ in range(10):
        next(iterator)
    state = before.state_dict(10, True)
    del iterator, before
    write_deltalake(table, pa.table({"id": pa.array([100], pa.int64()), "name": ["new"]}), mode="append")
    assert run_cli("incremental", table, out, "--quiet")[0] == 0
    with pytest.raises(ValueError, match="sample 10 of epoch 0 on dataset version"):
        StreamingDataset(local=out, batch_size=1, shuffle=True).load_state_dict(state)


def _reference_ids(out: str) -> list[int]:
    """The ``id`` of every sample streaming-community 0.14.2 reads from the dataset at ``out``, sorted."""
    import numpy as np

    from tests.differential.reference import ReferenceWorker, reference_python

    worker = ReferenceWorker(reference_python())
    try:
        result = worker.call("read", folder=out)
    finally:
        worker.close()
    assert "error" not in result, result
    ids = []
    for _, items in result["samples"]:
        _, dtype, data = dict(items)["id"]
        ids.append(int(np.frombuffer(data, dtype)[0]))
    return sorted(ids)


@pytest.mark.reference  # streaming-community reads the rebuilt index
def test_rebuild_index_of_a_mirror_comes_from_its_log_not_from_the_replaced_shards(tmp_path):
    """A mirror's folder still holds the shards its runs replaced (for readers of older versions): rebuilding its
    index from the files would bring deleted rows back, so it comes from the commit log; a missing file stops it."""
    import os

    table, out = str(tmp_path / "users"), str(tmp_path / "users_mds")
    _table(table, 200)
    assert run_cli("incremental", table, out, "--mode", "mirror", "--key", "id", "--quiet")[0] == 0
    DeltaTable(table).delete("id = 42")
    assert run_cli("incremental", table, out, "--mode", "mirror", "--key", "id", "--quiet")[0] == 0
    published = open(os.path.join(out, "index.json"), "rb").read()
    os.remove(os.path.join(out, "index.json"))

    code, rebuilt, err = run_cli("rebuild-index", out, "--json")
    assert code == 0 and rebuilt["source"].startswith("commit log version"), err
    assert open(os.path.join(out, "index.json"), "rb").read() == published
    assert 42 not in {sample["id"] for sample in LocalDataset(out)}
    assert _reference_ids(out) == [i for i in range(200) if i != 42]  # what streaming-community reads there

    code, scanned, err = run_cli("rebuild-index", out, "--json", "--dry-run", "--ignore-log")
    assert code == 0 and scanned["samples"] > 199, err  # what a scan would publish: the replaced shard too

    newest = [name for name in os.listdir(os.path.join(out, "increments")) if name.startswith("v00000001")]
    shard = next(
        os.path.join(root, name)
        for root, _, names in os.walk(os.path.join(out, "increments", newest[0]))
        for name in names
        if name.endswith(".mds.zstd")  # the stored file (reading the dataset left its decompressed copy beside it)
    )
    os.remove(shard)
    code, refused, err = run_cli("rebuild-index", out, "--json", "--force")
    assert code == 1 and not refused["written"] and len(refused["missing"]) == 1, refused
    assert open(os.path.join(out, "index.json"), "rb").read() == published


def test_a_key_without_mirror_is_a_usage_error(tmp_path):
    code, _, err = run_cli("incremental", str(tmp_path / "t"), str(tmp_path / "o"), "--key", "id")
    assert code == 2 and "--key is for --mode mirror" in err, err


def test_a_mirror_without_key_of_a_table_without_row_tracking_is_refused_before_writing(tmp_path):
    table, out = str(tmp_path / "users"), tmp_path / "users_mds"
    _table(table, 10)
    code, _, err = run_cli("incremental", table, str(out), "--mode", "mirror")
    assert code == 1 and "key=[...]" in err and "no Delta row tracking" in err, err
    assert not out.exists()


def test_without_deltalake_the_error_names_the_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "deltalake", None)  # as if it were not installed
    code, _, err = run_cli("incremental", str(tmp_path / "t"), str(tmp_path / "o"), "--quiet")
    assert code == 1 and install_command("delta") in err, err
