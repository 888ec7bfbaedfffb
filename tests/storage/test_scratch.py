"""Scratch folders (`streaming.storage.scratch`): a SIGKILLed owner's folder goes, a live owner's stays."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

import streaming.storage.scratch as scratch_module
from streaming.storage.scratch import OWNER_SUFFIX, make_scratch, remove_orphaned_scratch, remove_scratch

_OWNER = """
import os, signal, sys, time
from streaming.storage.scratch import make_scratch
path = make_scratch("mds-test-")
open(os.path.join(path, "shard.00000.mds"), "wb").write(b"x" * 100)
print(path, flush=True)
if sys.argv[1] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
"""


def _owner(how: str, tmp_path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-c", _OWNER, how], env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def test_only_folders_of_dead_owners_are_removed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    live, live_path = _owner("live", tmp_path)
    dead, dead_path = _owner("die", tmp_path)  # its own sweep leaves the live owner's folder alone
    dead.wait()
    foreign = tmp_path / "mds-test-not-ours"  # no owner file: never touched
    foreign.mkdir()
    try:
        assert os.path.isdir(dead_path) and os.path.exists(dead_path + OWNER_SUFFIX)
        assert remove_orphaned_scratch(str(tmp_path), "mds-test-") == 1
        assert not os.path.exists(dead_path) and not os.path.exists(dead_path + OWNER_SUFFIX)
        assert os.path.isfile(os.path.join(live_path, "shard.00000.mds")) and foreign.is_dir()
    finally:
        live.kill()
        live.wait()
    mine = make_scratch("mds-test-")  # this process's first folder of the prefix sweeps the (now dead) live one
    assert os.listdir(mine) == [] and not os.path.exists(live_path)
    remove_scratch(mine)
    assert sorted(os.listdir(tmp_path)) == ["mds-test-not-ours"]


def test_a_sweep_between_making_an_owner_file_and_locking_it_leaves_no_unowned_folder(tmp_path, monkeypatch) -> None:
    """The window the CI caught: two conversion workers start at once, and one's sweep takes the other's brand-new
    owner file (not locked yet) for a dead owner's. The folder must still end up with a locked owner file, or a
    later SIGKILL leaves it behind for good."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    real_flock = scratch_module.fcntl.flock
    swept = []

    def flock_after_a_sweep(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX and not swept:  # make_scratch's own blocking lock, the first time
            swept.append(remove_orphaned_scratch(str(tmp_path), "mds-race-"))
        real_flock(fd, operation)

    monkeypatch.setattr(scratch_module.fcntl, "flock", flock_after_a_sweep)
    path = make_scratch("mds-race-")
    monkeypatch.setattr(scratch_module.fcntl, "flock", real_flock)
    assert swept == [1], "the sweep must have taken the first owner file"
    owner = path + OWNER_SUFFIX
    assert os.path.isdir(path) and os.path.isfile(owner)
    other = os.open(owner, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
    assert remove_orphaned_scratch(str(tmp_path), "mds-race-") == 0
    remove_scratch(path)
    assert os.listdir(tmp_path) == []
