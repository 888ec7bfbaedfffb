"""Round four (issue 47), attack 1: shard tables in a state folder that a group may write to.

The victim (this process, uid 0) points ``STREAMING_STATE_DIR`` at a folder of theirs that their team's group may
write to (0770); the attacker is the real second user (uid 65534) of that group. Shard tables are named after a
digest of the index's path and ``stat`` fields, which anyone who can ``stat`` the index computes, so the attacker
plants ``table-<key of B>`` before the victim opens dataset B: a link to the table of dataset A (B then read with
A's columns, silently), or a link to a private folder of the victim's (which a build then emptied of ``*.tmp``
files and wrote into). Each test failed on the code before issue 47 and passes after it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from streaming import StreamingDataset
from streaming.dataset.shared_table import SHARE_FROM_BYTES
from tests.helpers import linked_dataset
from tests.security.conftest import as_other_user, group_writable_dir

SHARDS = 4_000  # an index.json past SHARE_FROM_BYTES: its table is shared through the state folder


def _dataset(root: Path, column: str, first: int) -> Path:
    """A dataset of ``SHARDS`` linked shards whose ``index.json`` is large enough for its table to be shared."""
    linked_dataset(root, SHARDS, column, first)
    assert (root / "index.json").stat().st_size >= SHARE_FROM_BYTES
    return root


def _private_folder(tmp_path: Path) -> Path:
    """The victim's private folder (0700), holding one file a planted link must never let a build delete or write."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "draft.tmp").write_text("the victim's unsaved work")
    return private


def _table_name(index: Path) -> str:
    """The name the package gives the shard table of ``index``: what anyone who can ``stat`` the index computes."""
    info = os.stat(index)
    fields = (os.path.realpath(index), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    digest = hashlib.blake2b("\0".join(str(field) for field in fields).encode(), digest_size=16).hexdigest()
    return f"table-{digest}"


def test_a_group_member_cannot_make_a_dataset_read_with_another_datasets_table(tmp_path, monkeypatch):
    a = _dataset(tmp_path / "a", "secret", 0)
    b = _dataset(tmp_path / "b", "public", 1000)
    state = group_writable_dir(str(tmp_path / "team"))
    monkeypatch.setenv("STREAMING_STATE_DIR", state)
    opened = StreamingDataset(local=str(a), batch_size=1)  # a job of the victim's holds dataset A open
    assert opened[0] == {"secret": 0}
    planted = os.path.join(state, _table_name(b / "index.json"))
    as_other_user(lambda: os.symlink(_table_name(a / "index.json"), planted))
    assert os.path.islink(planted)
    dataset = StreamingDataset(local=str(b), batch_size=1)
    assert [dataset[number] for number in range(3)] == [{"public": 1000}, {"public": 1001}, {"public": 1002}]


def test_a_group_member_cannot_make_a_build_delete_or_write_in_a_private_folder(tmp_path, monkeypatch):
    b = _dataset(tmp_path / "b", "public", 1000)
    private = _private_folder(tmp_path)
    state = group_writable_dir(str(tmp_path / "team"))
    monkeypatch.setenv("STREAMING_STATE_DIR", state)
    as_other_user(lambda: os.symlink(str(private), os.path.join(state, _table_name(b / "index.json"))))
    dataset = StreamingDataset(local=str(b), batch_size=1)
    assert dataset[0] == {"public": 1000}
    assert sorted(os.listdir(private)) == ["draft.tmp"]


def test_a_link_left_in_a_state_folder_made_private_later_is_not_followed(tmp_path, monkeypatch):
    """The second line: even in a folder trusted now (0700, the victim's), a table's folder or file planted as a
    link while the folder was open to the group is never followed, and a table file names its index."""
    a = _dataset(tmp_path / "a", "secret", 0)
    b = _dataset(tmp_path / "b", "public", 1000)
    private = _private_folder(tmp_path)
    state = group_writable_dir(str(tmp_path / "team"))
    monkeypatch.setenv("STREAMING_STATE_DIR", state)
    os.chmod(state, 0o700)  # private now: the state root is this folder itself
    opened = StreamingDataset(local=str(a), batch_size=1)
    assert os.path.isdir(os.path.join(state, _table_name(a / "index.json")))
    os.chmod(state, 0o770)
    as_other_user(lambda: os.symlink(_table_name(a / "index.json"), os.path.join(state, _table_name(b / "index.json"))))
    c = _dataset(tmp_path / "c", "public", 2000)
    as_other_user(lambda: os.symlink(str(private), os.path.join(state, _table_name(c / "index.json"))))
    os.chmod(state, 0o700)
    assert opened[0] == {"secret": 0}
    assert StreamingDataset(local=str(b), batch_size=1)[0] == {"public": 1000}
    assert StreamingDataset(local=str(c), batch_size=1)[0] == {"public": 2000}
    assert sorted(os.listdir(private)) == ["draft.tmp"]


def test_a_table_file_of_another_index_put_in_place_is_not_mapped(tmp_path, monkeypatch):
    """A table file whose header names another index (here copied by the user's own mistake, or by an attacker
    before the folder became private) is decoded again, never used."""
    a = _dataset(tmp_path / "a", "secret", 0)
    b = _dataset(tmp_path / "b", "public", 1000)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    monkeypatch.setenv("STREAMING_STATE_DIR", str(state))
    opened = StreamingDataset(local=str(a), batch_size=1)
    folder_b = state / _table_name(b / "index.json")
    folder_b.mkdir(mode=0o700)
    (folder_b / "table.bin").write_bytes((state / _table_name(a / "index.json") / "table.bin").read_bytes())
    os.chmod(folder_b / "table.bin", 0o600)
    assert opened[0] == {"secret": 0}
    assert StreamingDataset(local=str(b), batch_size=1)[0] == {"public": 1000}


def test_a_default_state_folder_open_to_a_group_is_passed_over_for_a_private_sub_folder(tmp_path, monkeypatch):
    """``/dev/shm/streaming-<uid>`` of the victim's own, but made group-writable: its sub-folder is used."""
    from streaming.dataset.coordination import root as state_module

    a = _dataset(tmp_path / "a", "secret", 0)
    b = _dataset(tmp_path / "b", "public", 1000)
    shm = tmp_path / "shm"
    shm.mkdir()
    default = group_writable_dir(str(shm / f"streaming-{os.getuid()}"))
    monkeypatch.delenv("STREAMING_STATE_DIR")
    monkeypatch.setattr(state_module, "_SHM", str(shm))
    monkeypatch.setattr(state_module, "_shm_is_writable_tmpfs", lambda: True)
    opened = StreamingDataset(local=str(a), batch_size=1)
    as_other_user(
        lambda: os.symlink(_table_name(a / "index.json"), os.path.join(default, _table_name(b / "index.json")))
    )
    assert StreamingDataset(local=str(b), batch_size=1)[0] == {"public": 1000}
    assert opened[0] == {"secret": 0}
    assert os.path.isdir(os.path.join(default, f"streaming-{os.getuid()}"))
