"""Issue 15, items 2, 3, 5 and 6: caches, state and datasets on shared machines.

A second local user is simulated by a forked child that drops to another uid (needs root; CI is root).
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from streaming import LocalDataset, MDSWriter, StreamingDataset
from streaming.dataset.coordination import lockfile
from streaming.dataset.stream import default_local_dir
from streaming.storage.url import UnsafePathError
from tests.security.conftest import OTHER_UID, as_other_user, world_writable_dir


def _dataset(path: str, compression: str | None = None, count: int = 4) -> dict:
    with MDSWriter(out=path, columns={"id": "int"}, compression=compression) as writer:
        for i in range(count):
            writer.write({"id": i})
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)["shards"][0]


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):
    """A /tmp-like folder both users share, as the default temp dir (and a private home cache for fallbacks)."""
    shared = world_writable_dir(str(tmp_path / "shared"))
    monkeypatch.setenv("TMPDIR", shared)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", shared)
    return shared


def test_another_users_cache_is_never_used(tmp_path, shared_tmp):
    remote = str(tmp_path / "remote")
    _dataset(remote)
    os.chmod(tmp_path, 0o755)
    os.chmod(remote, 0o755)
    parent = os.path.join(shared_tmp, f"streaming-cache-{os.getuid()}")

    def plant() -> None:  # the other user pre-creates the victim's cache folder with their own samples
        os.makedirs(parent, 0o777)

    as_other_user(plant)
    assert os.stat(parent).st_uid == OTHER_UID
    # Round two (issue 24): the planted folder no longer makes the dataset fail; a private one is used instead.
    dataset = StreamingDataset(remote=remote, batch_size=1)
    assert dataset[0] == {"id": 0}
    assert not os.path.commonpath([default_local_dir(remote), parent]) == parent
    assert os.listdir(parent) == []


def test_the_default_cache_is_private(tmp_path, shared_tmp):
    remote = str(tmp_path / "remote")
    _dataset(remote, compression="zstd")
    dataset = StreamingDataset(remote=remote, batch_size=1)
    assert dataset[0] == {"id": 0}
    local = default_local_dir(remote)
    assert local.startswith(os.path.join(shared_tmp, f"streaming-cache-{os.getuid()}") + os.sep)
    for folder in (os.path.dirname(local), local):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    for name in os.listdir(local):
        assert stat.S_IMODE(os.stat(os.path.join(local, name)).st_mode) == 0o600, name


def test_a_symlinked_sub_folder_is_refused(tmp_path):
    dataset, outside = str(tmp_path / "ds"), str(tmp_path / "outside")
    os.makedirs(outside)
    with MDSWriter(out=os.path.join(dataset, "sub"), columns={"id": "int"}, compression="zstd") as writer:
        writer.write({"id": 1})
    with open(os.path.join(dataset, "sub", "index.json")) as f:
        index = json.load(f)
    entry = index["shards"][0]
    zip_name = entry["zip_data"]["basename"]
    os.rename(os.path.join(dataset, "sub", zip_name), os.path.join(outside, zip_name))
    os.rmdir(os.path.join(dataset, "sub")) if not os.listdir(os.path.join(dataset, "sub")) else None
    for info in (entry["raw_data"], entry["zip_data"]):
        info["basename"] = "link/" + info["basename"]
    os.makedirs(os.path.join(dataset, "sub"), exist_ok=True)
    with open(os.path.join(dataset, "index.json"), "w") as f:
        json.dump(index, f)
    os.symlink(outside, os.path.join(dataset, "link"))
    before = sorted(os.listdir(outside))
    reader = LocalDataset(dataset).shards[0]
    with pytest.raises(UnsafePathError, match="link is a symlink inside"):
        reader.get_item(0)  # decompression would write outside
    with pytest.raises(UnsafePathError):
        reader.evict()  # eviction would delete outside
    assert sorted(os.listdir(outside)) == before


def test_a_symlinked_data_file_is_refused(tmp_path):
    dataset, secret = str(tmp_path / "ds"), str(tmp_path / "secret.mds")
    entry = _dataset(dataset)
    shard = os.path.join(dataset, entry["raw_data"]["basename"])
    os.rename(shard, secret)
    os.symlink(secret, shard)
    with pytest.raises(UnsafePathError, match="symlink"):
        LocalDataset(dataset)[0]


def test_lock_files_in_a_shared_state_folder_follow_no_symlink(tmp_path):
    state, victim = str(tmp_path / "state"), str(tmp_path / "victim.txt")
    os.makedirs(state)
    os.symlink(victim, os.path.join(state, "planted.lock"))
    with pytest.raises(OSError):
        lockfile.open_shared(os.path.join(state, "planted.lock"), create=True)
    assert not os.path.exists(victim)


def test_the_writer_follows_no_planted_temp_name(tmp_path):
    out, victim = str(tmp_path / "out"), str(tmp_path / "victim.txt")
    with open(victim, "w") as f:
        f.write("keep me")
    with MDSWriter(out=out, columns={"id": "int"}) as writer:
        os.symlink(victim, os.path.join(out, "shard.00000.mds.tmp"))  # planted while the writer runs
        writer.write({"id": 1})
    with open(victim) as f:
        assert f.read() == "keep me"
    assert not [name for name in os.listdir(out) if ".tmp." in name]


def test_decompressed_copies_are_no_more_readable_than_their_source(tmp_path):
    dataset = str(tmp_path / "ds")
    entry = _dataset(dataset, compression="zstd")
    zip_path = os.path.join(dataset, entry["zip_data"]["basename"])
    os.chmod(zip_path, 0o600)
    LocalDataset(dataset)[0]
    raw = os.path.join(dataset, entry["raw_data"]["basename"])
    assert stat.S_IMODE(os.stat(raw).st_mode) & 0o077 == 0


def test_both_default_cache_places_taken_by_another_user_give_a_fresh_private_folder(tmp_path, shared_tmp, monkeypatch):
    """Issue 34: the other user pre-created the temp cache folder and the home cache folder (a home the victim
    cannot use: here shared, as a home on a shared mount can be); the dataset takes a fresh private folder."""
    remote = str(tmp_path / "remote")
    _dataset(remote)
    os.chmod(tmp_path, 0o755)
    os.chmod(remote, 0o755)
    home_cache = world_writable_dir(str(tmp_path / "shared-home-cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", home_cache)
    planted = [
        os.path.join(shared_tmp, f"streaming-cache-{os.getuid()}"),
        os.path.join(home_cache, "mds-streaming", "cache"),
    ]

    def plant() -> None:
        for folder in planted:
            os.makedirs(folder, 0o777)

    as_other_user(plant)
    dataset = StreamingDataset(remote=remote, batch_size=1)
    assert dataset[0] == {"id": 0}
    local = dataset.streams[0].local
    assert local == default_local_dir(remote)  # one folder for the rest of the process
    assert all(os.path.commonpath([local, folder]) != folder for folder in planted)
    info = os.stat(local)
    assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    assert all(os.listdir(folder) == [] for folder in planted)
