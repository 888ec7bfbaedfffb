"""Issue 34: untrusted text in the library's own errors is escaped, not only in what the command line prints.

A column name or a shard file name in an ``index.json`` another user wrote carries ESC sequences and a newline;
on the code before, the exception a Python caller got (and a notebook or a log shows) held them raw: OSC 52 writes
the clipboard, CSI 2J clears the screen, the newline forges a line. Now each is written as its escape
(`streaming.storage.untrusted_text.shown`), and what the message names stays recognisable.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from streaming import LocalDataset, MDSWriter
from streaming.format.errors import ShardCorruptError
from streaming.storage.url import UnsafePathError
from tests.security.conftest import as_other_user, shared_dir

EVIL_COLUMN = "name\x1b]52;c;ZXZpbA==\x07\nFORGED: all checks passed"
EVIL_FILE = "shard\x1b[2J\n.mds"


def _dataset(path: str, *, column: str = "text", encoding: str = "str", basename: str | None = None) -> str:
    """A one-sample dataset whose index another writer edited: ``column`` named, ``encoding`` given, the shard
    file renamed ``basename``."""
    with MDSWriter(out=path, columns={"text": "str"}) as writer:
        writer.write({"text": "hello"})
    index_path = os.path.join(path, "index.json")
    with open(index_path) as file:
        index = json.load(file)
    shard = index["shards"][0]
    shard["column_names"], shard["column_encodings"] = [column], [encoding]
    if basename is not None:
        os.rename(os.path.join(path, shard["raw_data"]["basename"]), os.path.join(path, basename))
        shard["raw_data"]["basename"] = basename
    with open(index_path, "w") as file:
        json.dump(index, file)
    return path


def _assert_escaped(message: str) -> None:
    assert "\x1b" not in message and "\x07" not in message and "\n" not in message, repr(message)
    assert "\\x1b" in message


def test_a_column_name_with_escapes_is_escaped_in_the_unsafe_type_error(tmp_path):
    path = _dataset(str(tmp_path / "ds"), column=EVIL_COLUMN, encoding="pkl")
    with pytest.raises(ValueError, match="unsafe type") as info:
        LocalDataset(path)
    _assert_escaped(str(info.value))
    assert "name\\x1b]52;c;ZXZpbA==\\x07\\nFORGED" in str(info.value)


def test_a_file_and_column_name_with_escapes_are_escaped_in_a_corrupt_shard_error(tmp_path):
    path = _dataset(str(tmp_path / "ds"), column=EVIL_COLUMN, basename=EVIL_FILE)
    shard = os.path.join(path, EVIL_FILE)
    with open(shard, "r+b") as file:  # the string's first byte: no longer UTF-8
        file.seek(-len("hello"), os.SEEK_END)
        file.write(b"\xff")
    with pytest.raises(ShardCorruptError) as info:
        LocalDataset(path)[0]
    _assert_escaped(str(info.value))
    assert "shard\\x1b[2J\\n.mds" in str(info.value) and "FORGED" in str(info.value)


def test_a_linked_shard_file_with_escapes_in_its_name_is_refused_escaped(tmp_path):
    path = _dataset(os.path.join(shared_dir(str(tmp_path / "shared")), "ds"), basename=EVIL_FILE)
    os.chmod(path, 0o777)
    private = str(tmp_path / "victim")
    os.makedirs(private, 0o700)
    secret = os.path.join(private, "secret.mds")
    shutil.move(os.path.join(path, EVIL_FILE), secret)
    as_other_user(lambda: os.symlink(secret, os.path.join(path, EVIL_FILE)))
    with pytest.raises(UnsafePathError, match="symlink") as info:
        LocalDataset(path)[0]
    _assert_escaped(str(info.value))
