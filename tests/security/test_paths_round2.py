"""Issue 24, items 1 to 3: every path built from data or a listing stays inside its root, whatever another user does.

A second local user (a forked child that drops to uid `nobody`, `conftest.as_other_user`) plants commit files,
symlinked folders and files, and swaps a folder for a link between a listing and a delete (forced through a
hook), in folders both users can write to without /tmp's sticky bit (`conftest.shared_dir`): a team's shared
dataset folder. Each test failed on the code before issue 24 (see README.md).
"""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset, MDSWriter, StreamingDataset, vacuum
from streaming.convert import commit
from streaming.format import commit_log
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.local import LocalStorage
from streaming.storage.url import UnsafePathError
from tests.cli.conftest import run_cli
from tests.security.conftest import as_other_user, share_tree, shared_dir


def _write(path: str, samples: list[dict], columns: dict | None = None) -> dict:
    """An MDS dataset of ``samples``; returns its index."""
    with MDSWriter(out=path, columns=columns or {"id": "int", "text": "str"}) as writer:
        for sample in samples:
            writer.write(sample)
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)


def _raised(action) -> BaseException | str:
    """The exception ``action`` raises, or what it returned (as text) when it raised none."""
    try:
        return f"no error; it returned {action()!r}"
    except Exception as err:  # the test asserts which
        return err


def _private_file(folder: str, name: str, text: str) -> str:
    """A file only this user can read, in a folder only this user can enter."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


# -- 1. the commit log ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("log_format", ["whole state", "change"])
def test_a_planted_commit_cannot_make_an_overwrite_delete_outside_the_dataset(tmp_path, log_format):
    source = str(tmp_path / "rows.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3]}), source)
    out = os.path.join(shared_dir(str(tmp_path / "shared")), "ds")
    assert run_cli("convert", source, out, "--quiet", "--engine", "pyarrow")[0] == 0
    victim = _private_file(str(tmp_path / "victim"), "file", "keep me")
    share_tree(out)
    with open(os.path.join(out, "index.json")) as f:
        index_before = f.read()
    version = commit_log.commit_versions(DatasetRoot(out))[-1] + 1
    entry = json.loads(index_before)["shards"][0]
    entry["raw_data"] = {"basename": os.path.relpath(victim, out), "bytes": 7, "hashes": {}}
    body = {"version": version, "operation": "append", "base_version": version - 1, "committed_at": time.time()}
    if log_format == "whole state":  # what logs written before checkpoints hold, still read as they are
        body.update({"added": [], "removed": [], "shards": [entry], "metadata": None})
    else:  # this version's commits: the change
        body.update({"add": [entry], "remove": [], "record": None, "source_versions": {}})

    def plant() -> None:
        with open(os.path.join(out, "_mds_log", f"{version:020d}.json"), "w") as f:
            json.dump(body, f)

    as_other_user(plant)
    code, _, err = run_cli("convert", source, out, "--mode", "overwrite", "--quiet", "--engine", "pyarrow")
    assert os.path.exists(victim), "the overwrite deleted a file outside the dataset that a planted commit named"
    assert code == 1 and f"{version:020d}.json" in err and "not a plain relative path" in err, err
    with open(os.path.join(out, "index.json")) as f:
        assert f.read() == index_before, "index.json was rewritten from a refused commit"


# -- 2. the command line follows no link ---------------------------------------------------------------------


def _dataset_under_part(root: str) -> dict:
    """A dataset whose shard lies in the sub-folder ``part/`` (as a merged dataset's parts do)."""
    index = _write(os.path.join(root, "part"), [{"id": 1, "text": "from the source"}])
    for entry in index["shards"]:
        entry["raw_data"]["basename"] = "part/" + entry["raw_data"]["basename"]
    with open(os.path.join(root, "index.json"), "w") as f:
        json.dump(index, f)
    return index


def test_cp_writes_nothing_through_a_folder_another_user_linked_into_the_destination(tmp_path):
    src, dst = str(tmp_path / "src"), shared_dir(str(tmp_path / "dst"))
    index = _dataset_under_part(src)
    name = os.path.basename(index["shards"][0]["raw_data"]["basename"])
    victim = _private_file(str(tmp_path / "home"), name, "the victim's own file")
    as_other_user(lambda: os.symlink(os.path.dirname(victim), os.path.join(dst, "part")))
    code, _, err = run_cli("cp", src, dst)
    with open(victim, "rb") as f:
        assert f.read() == b"the victim's own file", "cp wrote through a planted symlink"
    assert code == 1 and "symlink" in err, err


def test_cp_from_a_local_source_never_copies_a_links_target(tmp_path):
    src, dst = str(tmp_path / "shared" / "src"), str(tmp_path / "dst")
    shared_dir(str(tmp_path / "shared"))
    index = _write(src, [{"id": 1, "text": "public"}])
    share_tree(src)
    secret = "AWS_SECRET_ACCESS_KEY=not-for-anyone-else"
    credentials = _private_file(str(tmp_path / "home" / ".aws"), "credentials", secret)
    shard = os.path.join(src, index["shards"][0]["raw_data"]["basename"])
    index["shards"][0]["raw_data"].update(bytes=len(secret), hashes={})

    def plant() -> None:  # the source's writer links a shard to the victim's credentials and fixes its size
        os.remove(shard)
        os.symlink(credentials, shard)
        with open(os.path.join(src, "index.json"), "w") as f:
            json.dump(index, f)

    as_other_user(plant)
    code, _, err = run_cli("cp", src, dst)
    copied = [os.path.join(folder, name) for folder, _, names in os.walk(dst) for name in names]
    assert not any(secret in open(path, errors="replace").read() for path in copied), "the credentials were copied"
    assert code == 1 and "symlink" in err, err


def test_inspect_shows_nothing_of_a_file_a_link_points_to(tmp_path):
    shared = shared_dir(str(tmp_path / "shared"))
    private = str(tmp_path / "private")
    os.makedirs(private, mode=0o700)
    victim_index = _write(os.path.join(private, "ds"), [{"id": 7, "text": "the victim's private sample"}])
    os.chmod(private, 0o700)
    ds = os.path.join(shared, "ds")
    _write(ds, [{"id": 1, "text": "public"}])
    share_tree(ds)
    entry = victim_index["shards"][0]
    target = os.path.join(private, "ds", entry["raw_data"]["basename"])

    def plant() -> None:
        shard = os.path.join(ds, entry["raw_data"]["basename"])
        os.remove(shard)
        os.symlink(target, shard)
        with open(os.path.join(ds, "index.json"), "w") as f:
            json.dump(victim_index, f)

    as_other_user(plant)
    code, text, err = run_cli("inspect", ds)
    assert "private sample" not in text, "inspect printed a sample of a file the link points to"
    assert code == 1 and "symlink" in err, err


def test_merge_index_republishes_no_index_a_link_points_to(tmp_path):
    root = shared_dir(str(tmp_path / "shared" / "root"))
    os.chmod(os.path.dirname(root), 0o777)
    _write(os.path.join(root, "part-0"), [{"id": 1, "text": "public"}])
    share_tree(root)
    private = str(tmp_path / "private")
    os.makedirs(private, mode=0o700)
    _write(os.path.join(private, "ds"), [{"id": 9, "secret_column": "private"}], {"secret_column": "str", "id": "int"})

    def plant() -> None:
        os.makedirs(os.path.join(root, "part-1"))
        os.symlink(os.path.join(private, "ds", "index.json"), os.path.join(root, "part-1", "index.json"))

    as_other_user(plant)
    code, _, err = run_cli("merge-index", root)
    merged = os.path.join(root, "index.json")
    assert not os.path.exists(merged) or "secret_column" not in open(merged).read(), "a private index was merged"
    assert code == 1 and "symlink" in err, err


def test_convert_reads_no_file_a_link_in_a_shared_source_folder_points_to(tmp_path):
    source = shared_dir(str(tmp_path / "shared" / "rows"))
    pq.write_table(pa.table({"text": ["public row"]}), os.path.join(source, "a.parquet"))
    private = str(tmp_path / "private")
    os.makedirs(private, mode=0o700)
    pq.write_table(pa.table({"text": ["the victim's private row"]}), os.path.join(private, "rows.parquet"))
    as_other_user(lambda: os.symlink(os.path.join(private, "rows.parquet"), os.path.join(source, "b.parquet")))
    out = str(tmp_path / "out")
    code, _, err = run_cli("convert", source, out, "--quiet", "--engine", "pyarrow")
    written = os.path.exists(os.path.join(out, "index.json"))
    texts = [sample["text"] for sample in LocalDataset(out)] if written else []
    assert "the victim's private row" not in texts, "a file a planted link points to was converted"
    assert code == 1 and "symlink" in err, err


# -- 2. a folder swapped for a link between listing and deleting (forced through a hook) ---------------------


def _swap_for_link(folder: str, target: str) -> None:
    """As the other user: move ``folder`` aside and put a link to ``target`` in its place."""

    def swap() -> None:
        os.rename(folder, folder + ".moved")
        os.symlink(target, folder)

    as_other_user(swap)


def _leftover(root: str, relative: str, age_days: float = 8) -> None:
    path = os.path.join(root, *relative.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("leftover")
    then = time.time() - age_days * 86400
    os.utime(path, (then, then))
    share_tree(root)


def test_vacuum_deletes_nothing_through_a_folder_swapped_for_a_link_after_listing(tmp_path, monkeypatch):
    ds = os.path.join(shared_dir(str(tmp_path / "shared")), "ds")
    _write(ds, [{"id": 1, "text": "a"}])
    _leftover(ds, "old-run/x.bin")
    victim = _private_file(str(tmp_path / "victim"), "x.bin", "keep me")
    original = LocalStorage.list
    swapped = []

    def list_then_swap(self: LocalStorage, prefix_url: str) -> list[str]:
        listing = original(self, prefix_url)
        if not swapped:  # the race, forced: vacuum has listed the dataset, and deletes what it listed later
            swapped.append(prefix_url)
            _swap_for_link(os.path.join(ds, "old-run"), os.path.dirname(victim))
        return listing

    monkeypatch.setattr(LocalStorage, "list", list_then_swap)
    error = _raised(lambda: vacuum(ds, retention=0, retention_check=False))
    assert swapped and os.path.exists(victim), "vacuum deleted a file through a folder swapped for a link"
    assert isinstance(error, UnsafePathError) and "old-run is a symlink" in str(error), error


def test_sync_deletes_nothing_through_a_folder_swapped_for_a_link_after_listing(tmp_path, monkeypatch):
    src, dst = str(tmp_path / "src"), os.path.join(shared_dir(str(tmp_path / "shared")), "dst")
    _write(src, [{"id": 1, "text": "a"}])
    _leftover(dst, "extra/x.bin", age_days=0)
    victim = _private_file(str(tmp_path / "victim"), "x.bin", "keep me")
    original = DatasetRoot.list_relative

    def list_then_swap(self: DatasetRoot, folder: str = "") -> list[str]:
        listing = original(self, folder)
        if "extra/x.bin" in listing:  # sync listed the destination's extra files; now it deletes them
            _swap_for_link(os.path.join(dst, "extra"), os.path.dirname(victim))
        return listing

    monkeypatch.setattr(DatasetRoot, "list_relative", list_then_swap)
    code, _, err = run_cli("sync", src, dst)
    assert os.path.exists(victim), "sync deleted a file through a folder swapped for a link"
    assert code == 1 and "symlink" in err, err


def test_the_conversion_leftover_cleanup_deletes_nothing_through_a_swapped_folder(tmp_path, monkeypatch):
    out = os.path.join(shared_dir(str(tmp_path / "shared")), "ds")
    run = "20240101T000000Z-abcdef"
    _leftover(out, f"{run}/part-00000-attempt-7/shard.00000.mds", age_days=0)
    victim = _private_file(str(tmp_path / "victim" / "part-00000-attempt-7"), "shard.00000.mds", "keep me")
    original = DatasetRoot.list_relative

    def list_then_swap(self: DatasetRoot, folder: str = "") -> list[str]:
        listing = original(self, folder)
        _swap_for_link(os.path.join(out, run), os.path.dirname(os.path.dirname(victim)))
        return listing

    monkeypatch.setattr(DatasetRoot, "list_relative", list_then_swap)
    error = _raised(lambda: commit.delete_leftovers(DatasetRoot(out), run, set(), flat=False, everything_else=False))
    assert os.path.exists(victim), "the cleanup of a failed attempt deleted a file through a swapped folder"
    assert isinstance(error, UnsafePathError) and f"{run} is a symlink" in str(error), error


def test_a_writer_writes_nothing_through_its_folder_swapped_for_a_link(tmp_path):
    out = os.path.join(shared_dir(str(tmp_path / "shared")), "out")
    victim = str(tmp_path / "victim")
    os.makedirs(victim, mode=0o700)
    with MDSWriter(out=out, columns={"x": "bytes"}, size_limit=1 << 10) as writer:
        writer.write({"x": bytes(900)})
        writer.write({"x": bytes(900)})  # the first shard is written
        os.chmod(out, 0o777)
        _swap_for_link(out, victim)  # by a user who may write the output's parent folder
        for _ in range(4):
            writer.write({"x": bytes(900)})
    assert os.listdir(victim) == [], "the writer wrote through its folder swapped for a link"
    assert "index.json" in os.listdir(out + ".moved"), "the writer lost its own folder"


# -- 3. percent-encoding on sftp:// is checked after decoding (a real SFTP server on loopback) ---------------


@pytest.fixture
def sftp(remote_factory, sftp_server):
    remote = remote_factory("sftp")
    unique = remote.root.rstrip("/").rsplit("/", 1)[1]
    return remote, os.path.join(str(sftp_server.extra["root"]), "data", unique)


def test_an_sftp_basename_that_decodes_to_dot_dot_is_refused_when_reading(sftp, tmp_path):
    remote, on_server = sftp
    private = _write(os.path.join(on_server, "private"), [{"id": 9, "text": "outside the prefix"}])
    index = _write(os.path.join(on_server, "ds"), [{"id": 1, "text": "inside"}])
    index["shards"] = private["shards"]
    index["shards"][0]["raw_data"]["basename"] = "%2e%2e/private/" + private["shards"][0]["raw_data"]["basename"]
    with open(os.path.join(on_server, "ds", "index.json"), "w") as f:
        json.dump(index, f)
    dataset = StreamingDataset(remote=remote.url("ds"), local=str(tmp_path / "cache"), batch_size=1)
    error = _raised(lambda: dataset[0])
    assert isinstance(error, UnsafePathError) and "once decoded" in str(error), f"read outside the prefix: {error}"


def test_cp_to_sftp_writes_no_basename_that_decodes_outside_the_destination(sftp, tmp_path):
    remote, on_server = sftp
    src = str(tmp_path / "src")
    index = _write(os.path.join(src, "%2e%2e", "%2e%2e"), [{"id": 1, "text": "planted"}])
    for entry in index["shards"]:
        entry["raw_data"]["basename"] = "%2e%2e/%2e%2e/" + entry["raw_data"]["basename"]
    with open(os.path.join(src, "index.json"), "w") as f:
        json.dump(index, f)
    os.makedirs(os.path.join(on_server, "a", "b"))
    code, _, err = run_cli("cp", src, remote.url("a/b/dst"))
    outside = os.path.join(on_server, "a", index["shards"][0]["raw_data"]["basename"].rsplit("/", 1)[1])
    assert not os.path.exists(outside), "cp wrote outside the sftp:// destination"
    assert code == 1 and "once decoded" in err, err
