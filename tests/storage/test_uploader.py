"""ShardUploader on every scheme: background uploads, index last, keep_local, exist_ok, failures."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from streaming.format.index import INDEX_BASENAME
from streaming.storage import ShardUploader, storage_for
from streaming.storage.out_argument import UNNAMED_LOCAL_PREFIX
from streaming.storage.scratch import OWNER_SUFFIX, remove_orphaned_scratch
from streaming.storage.url import join_url

pytestmark = pytest.mark.services

FILES = {"shard.00000.mds": b"a" * 5000, "shard.00001.mds.zstd": b"b" * 300, "part/shard.00002.json.meta": b"c"}


def _write_dataset(uploader: ShardUploader) -> None:
    for name, data in FILES.items():
        path = os.path.join(uploader.local, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as sink:
            sink.write(data)
        uploader.upload(name)
    with open(os.path.join(uploader.local, "index.json"), "w") as sink:
        json.dump({"version": 2, "shards": []}, sink)


def test_writes_dataset_to_remote(remote, tmp_path):
    out = (str(tmp_path / "staging"), remote.root) if remote.scheme == "local" else remote.root
    uploader = ShardUploader(out, max_workers=3, index_basename=INDEX_BASENAME)
    assert uploader.remote == remote.root
    local = uploader.local
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    storage = storage_for(remote.root)
    assert storage.list(remote.root) == sorted(join_url(remote.root, name) for name in [*FILES, "index.json"])
    for name, data in FILES.items():
        storage.get(join_url(remote.root, name), str(tmp_path / "check" / name))
        assert (tmp_path / "check" / name).read_bytes() == data
    assert not os.path.exists(local), "the temporary local copy is removed when keep_local=False"
    assert not os.path.exists(local + OWNER_SUFFIX), "and so is the owner file of its scratch folder"


def test_keep_local_with_local_remote_pair(cloud, tmp_path):
    local = str(tmp_path / "local")
    uploader = ShardUploader((local, cloud.root), keep_local=True, max_workers=2, index_basename=INDEX_BASENAME)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    assert sorted(os.path.relpath(os.path.join(d, f), local) for d, _, fs in os.walk(local) for f in fs) == sorted(
        [*FILES, "index.json"]
    )
    assert storage_for(cloud.root).exists(join_url(cloud.root, "index.json"))


def test_uploaded_files_leave_local_dir_without_keep_local(remote_factory, tmp_path):
    s3 = remote_factory("s3")
    local = str(tmp_path / "local")
    uploader = ShardUploader((local, s3.root), index_basename=INDEX_BASENAME)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    assert not os.path.exists(local)
    assert len(storage_for(s3.root).list(s3.root)) == len(FILES) + 1


def test_exist_ok_is_checked_against_the_remote(remote_factory):
    s3 = remote_factory("s3")
    first = ShardUploader(s3.root, index_basename=INDEX_BASENAME)
    _write_dataset(first)
    first.finish(INDEX_BASENAME)
    staged = _staging_folders()
    with pytest.raises(FileExistsError, match="already holds") as raised:
        ShardUploader(s3.root, index_basename=INDEX_BASENAME)
    assert s3.root in str(raised.value)
    assert _staging_folders() == staged, "a refused remote leaves no staging folder behind"
    again = ShardUploader(s3.root, exist_ok=True, index_basename=INDEX_BASENAME)
    storage = storage_for(s3.root)
    assert not storage.exists(join_url(s3.root, "index.json")), "a stale index is removed before new shards land"
    _write_dataset(again)
    again.finish(INDEX_BASENAME)
    assert storage.exists(join_url(s3.root, "index.json"))


def test_failed_shard_blocks_the_index(remote_factory):
    s3 = remote_factory("s3")
    uploader = ShardUploader(s3.root, retry=1, index_basename=INDEX_BASENAME)
    _write_dataset(uploader)
    uploader.upload("never-written.mds")
    with pytest.raises(FileNotFoundError, match="never-written.mds"):
        uploader.finish(INDEX_BASENAME)
    with pytest.raises(FileNotFoundError):
        uploader.check()
    storage = storage_for(s3.root)
    assert not storage.exists(join_url(s3.root, "index.json"))
    assert storage.exists(join_url(s3.root, "shard.00000.mds"))
    assert not os.path.exists(uploader.local + OWNER_SUFFIX), "a failed writer's files are kept for good"
    shutil.rmtree(uploader.local)


def test_abort_publishes_no_index_and_keeps_the_local_copy(remote_factory):
    """The note promises the staged files: they stay after this process exits, and no later writer sweeps them."""
    s3 = remote_factory("s3")
    uploader = ShardUploader(s3.root, index_basename=INDEX_BASENAME)
    local = uploader.local
    _write_dataset(uploader)
    error = OSError("disk full")
    uploader.abort(error)
    assert not storage_for(s3.root).exists(join_url(s3.root, "index.json"))
    assert sorted(os.listdir(local)) and f"the files are kept in {local}." in error.__notes__[0]
    assert not os.path.exists(local + OWNER_SUFFIX), "an ordinary folder now, which no sweep takes"
    remove_orphaned_scratch(tempfile.gettempdir(), UNNAMED_LOCAL_PREFIX)
    assert sorted(os.listdir(local))
    shutil.rmtree(local)


_KILLED_WRITER = """
import os, signal, sys
from streaming import MDSWriter
writer = MDSWriter(out=sys.argv[1], columns={"x": "bytes"}, size_limit=1 << 12)
for _ in range(20):
    writer.write({"x": os.urandom(1000)})
print(writer.local, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _staging_folders() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith(UNNAMED_LOCAL_PREFIX)}


def test_a_killed_writers_staging_folder_is_removed_by_the_next_writer(remote_factory, tmp_path, monkeypatch):
    """A SIGKILLed writer (an out-of-memory kill, a cancelled job) cannot remove its staging folder of a remote-only
    `out`; the next process that stages one removes it, so a job run every hour does not fill the driver's disk."""
    s3 = remote_factory("s3")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, join_url(s3.root, "killed")], env=env, capture_output=True, text=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    staged = killed.stdout.strip()
    assert os.path.dirname(staged) == str(tmp_path) and os.path.isdir(staged) and os.listdir(staged)
    uploader = ShardUploader(join_url(s3.root, "next"), index_basename=INDEX_BASENAME)
    assert not os.path.exists(staged) and not os.path.exists(staged + OWNER_SUFFIX)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    assert os.listdir(tmp_path) == [], "a finished writer leaves nothing in the temporary directory"


def test_local_only_output(tmp_path):
    out = str(tmp_path / "out")
    uploader = ShardUploader(out, index_basename=INDEX_BASENAME)
    assert (uploader.local, uploader.remote) == (out, None)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    assert os.path.isfile(os.path.join(out, "index.json"))
    with pytest.raises(FileExistsError, match="not empty"):
        ShardUploader(out, index_basename=INDEX_BASENAME)
    ShardUploader(out, exist_ok=True, index_basename=INDEX_BASENAME)
    assert os.listdir(out) == []


def test_bad_out_is_rejected():
    with pytest.raises(ValueError, match="pair"):
        ShardUploader(("a", "b", "c"), index_basename=INDEX_BASENAME)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry"):
        ShardUploader("/tmp/x-never-created", retry=0, index_basename=INDEX_BASENAME)


def test_keep_local_with_a_remote_only_out_keeps_the_staging_folder_for_good(remote_factory):
    """Asked to keep its files, a finished writer turns its scratch folder into an ordinary one that no sweep of a
    later process removes (upstream's writer keeps its `mkdtemp` folder too)."""
    from streaming.base.storage import CloudUploader

    s3 = remote_factory("s3")
    uploader = ShardUploader(join_url(s3.root, "kept"), keep_local=True, index_basename=INDEX_BASENAME)
    _write_dataset(uploader)
    uploader.finish(INDEX_BASENAME)
    compat = CloudUploader.get(join_url(s3.root, "compat"), keep_local=True)
    try:
        for folder in (uploader.local, compat.local):
            assert os.path.isdir(folder) and not os.path.exists(folder + OWNER_SUFFIX)
        assert "index.json" in os.listdir(uploader.local)
    finally:
        shutil.rmtree(uploader.local)
        shutil.rmtree(compat.local)


def test_the_compat_uploader_removes_its_staging_folder_or_keeps_it_after_a_failure(remote_factory):
    """`CloudUploader` as a writer's sink: a finished one leaves nothing (not even the owner file); an aborted one
    keeps its files for good, as `ShardUploader` does."""
    from streaming.base.storage import CloudUploader

    s3 = remote_factory("s3")
    finished = CloudUploader.get(join_url(s3.root, "finished"))
    aborted = CloudUploader.get(join_url(s3.root, "aborted"))
    for uploader in (finished, aborted):
        assert os.path.isfile(uploader.local + OWNER_SUFFIX), "staged in a scratch folder"
        with open(os.path.join(uploader.local, INDEX_BASENAME), "w") as index:
            index.write('{"version": 2, "shards": []}')
    finished.finish(INDEX_BASENAME)
    assert not os.path.exists(finished.local) and not os.path.exists(finished.local + OWNER_SUFFIX)
    aborted.abort(OSError("disk full"))
    try:
        assert not os.path.exists(aborted.local + OWNER_SUFFIX)
        assert os.listdir(aborted.local) == [INDEX_BASENAME]
    finally:
        shutil.rmtree(aborted.local)
