"""Issue 24, items 2 to 4: files, caches and state in places other local users can write.

A second local user (uid `nobody`, `conftest.as_other_user`) plants links, FIFOs, caches and lock files, or
truncates a shard while it is read. What would hang or kill the test process (a FIFO, SIGBUS) runs in a
forked child with a timeout (`conftest.in_child`). Each test failed on the code before issue 24 (README.md).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator

import pytest

from streaming import LocalDataset, MDSWriter, StreamingDataset
from streaming.dataset.coordination import root as state_module
from streaming.dataset.coordination.shard_locks import dir_key
from streaming.storage.url import UnsafePathError
from tests.cli.conftest import run_cli
from tests.security.conftest import OTHER_UID, as_other_user, in_child, require_root, share_tree, shared_dir


def _write(path: str, samples: list[dict], columns: dict | None = None, **kwargs) -> dict:
    with MDSWriter(out=path, columns=columns or {"id": "int", "text": "str"}, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    with open(os.path.join(path, "index.json")) as f:
        return json.load(f)


def _as_other_user_write(path: str, samples: list[dict], columns: dict | None = None) -> None:
    """Write a dataset as the other user (its files are theirs, readable by everyone)."""

    def write() -> None:
        os.umask(0o022)
        _write(path, samples, columns)

    as_other_user(write)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The user's private fallbacks (``~/.cache``) inside the test's folder."""
    cache = tmp_path / "home-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return cache


# -- 4. a local remote: its files are reached without following a link ---------------------------------------


def test_a_local_remote_never_serves_the_file_a_symlinked_shard_points_to(tmp_path):
    remote = os.path.join(shared_dir(str(tmp_path / "shared")), "ds")
    index = _write(remote, [{"id": 1, "text": "public"}])
    share_tree(remote)
    private = str(tmp_path / "private")
    os.makedirs(private, mode=0o700)
    victim = _write(os.path.join(private, "ds"), [{"id": 7, "text": "the victim's private sample"}])
    shard = os.path.join(remote, index["shards"][0]["raw_data"]["basename"])

    def plant() -> None:
        os.remove(shard)
        os.symlink(os.path.join(private, "ds", victim["shards"][0]["raw_data"]["basename"]), shard)
        with open(os.path.join(remote, "index.json"), "w") as f:
            json.dump(victim, f)

    as_other_user(plant)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / "cache"), batch_size=1)
    try:
        served = dataset[0]
    except UnsafePathError as err:
        assert "is a symlink" in str(err), err
    else:
        pytest.fail(f"served the file a symlinked shard points to: {served}")


# -- 3. caches and state the user does not own are not trusted -----------------------------------------------


class _Plant:
    """A pickle that, when loaded, creates the file ``path`` (standing for any code run as the loader)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_an_explicit_local_folder_another_user_created_first_is_refused(tmp_path):
    remote = str(tmp_path / "remote")
    _write(remote, [{"id": 1, "value": "real"}], {"id": "int", "value": "pkl"})
    cache = os.path.join(shared_dir(str(tmp_path / "shared")), "cache")
    marker = str(tmp_path / "ran-as-you")
    os.chmod(tmp_path, 0o777)

    def plant() -> None:  # the other user fills the folder the victim will pass as local= with their samples
        os.umask(0o022)
        _write(cache, [{"id": 1, "value": _Plant(marker)}], {"id": "int", "value": "pkl"})

    as_other_user(plant)
    with pytest.raises(PermissionError, match=f"belongs to uid {OTHER_UID}, not to you"):
        dataset = StreamingDataset(remote=remote, local=cache, batch_size=1, allow_unsafe_types=True)
        dataset[0]
    assert not os.path.exists(marker), "another user's pickle ran as this user"


def test_a_world_writable_explicit_local_folder_is_refused(tmp_path):
    remote = str(tmp_path / "remote")
    _write(remote, [{"id": 1, "text": "real"}])
    cache = shared_dir(str(tmp_path / "cache"))
    as_other_user(lambda: _write(cache, [{"id": 1, "text": "planted"}]))
    with pytest.raises(PermissionError, match="writable by every user"):
        StreamingDataset(remote=remote, local=cache, batch_size=1)[0]


@pytest.fixture
def other_user_process() -> Iterator:
    """``start(action)``: run ``action`` as the other user in a process that stays alive until the test ends."""
    children = []

    def start(action) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                os.setgid(OTHER_UID)
                os.setuid(OTHER_UID)
                action()
                os.write(write, b"ready")
                signal.pause()
            finally:
                os._exit(1)
        os.close(write)
        children.append(pid)
        with os.fdopen(read, "rb") as pipe:
            assert pipe.read(5) == b"ready", "the other user's process failed"

    require_root()
    yield start
    for pid in children:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_a_shared_state_folder_does_not_let_another_user_block_reads(tmp_path, monkeypatch, other_user_process):
    remote, local = str(tmp_path / "remote"), str(tmp_path / "local")
    _write(remote, [{"id": 1, "text": "a"}])
    state = shared_dir(str(tmp_path / "state"))
    monkeypatch.setenv("STREAMING_STATE_DIR", state)
    lock_path = os.path.join(state, f"shards-{dir_key([os.path.join(local, '')])}.lock")

    def hold_the_shard_locks() -> None:  # a predictable lock file, created and held by the other user
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1 << 20, 0)

    other_user_process(hold_the_shard_locks)
    outcome = in_child(lambda: StreamingDataset(remote=remote, local=local, batch_size=1)[0], timeout=20)
    assert outcome.kind == "ok" and "'id': 1" in outcome.detail, outcome


def test_a_lock_file_of_another_user_is_never_used(tmp_path):
    from streaming.dataset.coordination import lockfile

    folder = str(tmp_path / "state")
    os.makedirs(folder)
    os.chmod(tmp_path, 0o755)
    os.chmod(folder, 0o777)
    path = os.path.join(folder, "shards-x.lock")
    as_other_user(lambda: os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o666)))
    with pytest.raises(PermissionError, match="not a regular file of yours"):
        lockfile.open_shared(path, create=True)


def test_a_state_folder_another_user_created_first_is_replaced_by_a_private_one(tmp_path, monkeypatch, home):
    remote = str(tmp_path / "remote")
    _write(remote, [{"id": 1, "text": "a"}])
    shm = shared_dir(str(tmp_path / "shm"))
    private_tmp = str(tmp_path / "tmp")
    os.makedirs(private_tmp, mode=0o700)
    monkeypatch.delenv("STREAMING_STATE_DIR")
    monkeypatch.setattr(state_module, "_SHM", shm)
    monkeypatch.setattr(state_module, "_shm_is_writable_tmpfs", lambda: True)
    monkeypatch.setattr(tempfile, "tempdir", private_tmp)
    planted = os.path.join(shm, f"streaming-{os.getuid()}")
    as_other_user(lambda: os.mkdir(planted, 0o777))
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / "local"), batch_size=1)
    assert dataset[0]["id"] == 1
    assert os.listdir(planted) == [], "the package used another user's state folder"
    assert os.path.isdir(os.path.join(private_tmp, f"streaming-{os.getuid()}"))


# -- 2 and 5. files that are not regular files, and files truncated while mapped -----------------------------


def _fifo_in_place_of_the_shard(tmp_path) -> str:
    ds = os.path.join(shared_dir(str(tmp_path / "shared")), "ds")
    index = _write(ds, [{"id": 1, "text": "a"}])
    share_tree(ds)
    shard = os.path.join(ds, index["shards"][0]["raw_data"]["basename"])

    def plant() -> None:
        os.remove(shard)
        os.mkfifo(shard, 0o666)

    as_other_user(plant)
    return ds


def test_a_fifo_in_place_of_a_shard_fails_at_once_instead_of_blocking_readers(tmp_path):
    ds = _fifo_in_place_of_the_shard(tmp_path)
    for read in (lambda: LocalDataset(ds)[0], lambda: StreamingDataset(local=ds, batch_size=1)[0]):
        outcome = in_child(read, timeout=15)
        assert outcome.kind == "error" and "not a regular file" in outcome.detail, outcome


def test_a_fifo_in_place_of_a_shard_does_not_hang_the_command_line(tmp_path):
    ds = _fifo_in_place_of_the_shard(tmp_path)
    for command in ("inspect", "verify", "cp"):
        argv = [command, ds] + ([str(tmp_path / f"copy-{command}")] if command == "cp" else [])
        outcome = in_child(lambda argv=argv: run_cli(*argv), timeout=20)
        assert outcome.kind == "ok" and "not a regular file" in outcome.detail, (command, outcome)


def test_a_shard_truncated_while_mapped_is_a_clean_error_not_sigbus(tmp_path):
    ds = os.path.join(shared_dir(str(tmp_path / "shared")), "ds")
    samples = [{"id": i, "text": "x" * 100} for i in range(2000)]  # a shard of several pages
    _as_other_user_write(ds, samples)
    with open(os.path.join(ds, "index.json")) as f:
        shard = os.path.join(ds, json.load(f)["shards"][0]["raw_data"]["basename"])

    def read_while_the_owner_truncates() -> object:
        dataset = LocalDataset(ds)
        assert dataset[0]["id"] == 0
        as_other_user(lambda: os.truncate(shard, 4096))
        return dataset[len(dataset) - 1]

    outcome = in_child(read_while_the_owner_truncates, timeout=30)
    assert outcome.kind == "error" and outcome.detail.startswith("ShardCorruptError"), outcome
    assert os.path.basename(shard) in outcome.detail, outcome


def test_the_files_of_another_user_are_read_without_a_mapping(tmp_path):
    """Regression guard of the unmapped path: every way of reading gives the samples the mapped path gives."""
    ds = os.path.join(shared_dir(str(tmp_path / "shared")), "ds")
    samples = [{"id": i, "text": f"sample {i}"} for i in range(50)]
    _as_other_user_write(ds, samples)
    dataset = LocalDataset(ds)
    assert [dataset[i] for i in range(len(dataset))] == samples
    assert list(dataset) == samples
    reader = dataset.readers[0]
    assert len(reader.open().buffer) == 0, "another user's shard was mapped"
    own = str(tmp_path / "own")
    shutil.copytree(ds, own)  # the same bytes, owned by this user: mapped
    mapped = LocalDataset(own).readers[0]
    assert len(mapped.open().buffer) > 0
    assert [reader.get_sample_data(i) for i in range(50)] == [mapped.get_sample_data(i) for i in range(50)]


def test_a_symlink_to_dev_zero_is_refused_in_a_local_remote(tmp_path):
    remote = str(tmp_path / "remote")
    index = _write(remote, [{"id": 1, "text": "a"}])
    shard = os.path.join(remote, index["shards"][0]["raw_data"]["basename"])
    os.remove(shard)
    os.symlink("/dev/zero", shard)
    started = time.monotonic()
    with pytest.raises(UnsafePathError, match="is a symlink"):
        StreamingDataset(remote=remote, local=str(tmp_path / "cache"), batch_size=1)[0]
    assert time.monotonic() - started < 10
