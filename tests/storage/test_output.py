"""`streaming.storage.out_argument`: the one parser of an `out` argument, and the local directory of an output."""

from __future__ import annotations

import os

import pytest

from streaming.storage.out_argument import Output, local_directory, normalize_root, parse_out
from streaming.storage.scratch import OWNER_SUFFIX, remove_scratch


def test_the_three_spellings_of_out(tmp_path):
    assert parse_out(str(tmp_path)) == Output(str(tmp_path), None)
    assert parse_out("file://" + str(tmp_path)) == Output(str(tmp_path), None)
    assert parse_out("~/data") == Output(os.path.expanduser("~/data"), None)
    assert parse_out("s3://bucket/data") == Output(None, "s3://bucket/data")
    assert parse_out("dbfs:/Volumes/c/s/v/data") == Output(None, "dbfs:/Volumes/c/s/v/data")
    assert parse_out("/Volumes/not/mounted/here") == Output(None, "/Volumes/not/mounted/here")
    assert parse_out((str(tmp_path), "gs://b/k")) == Output(str(tmp_path), "gs://b/k")
    assert parse_out(["", "gs://b/k"]) == Output(None, "gs://b/k")
    assert parse_out((str(tmp_path), "")) == Output(str(tmp_path), None)


@pytest.mark.parametrize("out", [("a", "b", "c"), "", None, 3])
def test_a_bad_out_says_what_is_accepted(out):
    with pytest.raises(ValueError, match=r"a directory, a URL or a \(local, remote\) pair"):
        parse_out(out)


def test_normalize_root():
    assert normalize_root("s3://bucket/data/") == "s3://bucket/data"
    assert normalize_root("file:///tmp/x/../y") == "/tmp/y"
    assert normalize_root("relative") == os.path.abspath("relative")
    with pytest.raises(TypeError, match="local path or a URL string"):
        normalize_root(("a", "b"))  # type: ignore[arg-type]


def test_local_directory(tmp_path):
    fresh = local_directory(None, exist_ok=False, clear=False)
    assert os.path.isdir(fresh) and os.listdir(fresh) == []
    assert os.path.isfile(fresh + OWNER_SUFFIX), "an unnamed local folder is a scratch folder"
    remove_scratch(fresh)
    assert not os.path.exists(fresh) and not os.path.exists(fresh + OWNER_SUFFIX)
    folder = tmp_path / "out"
    assert local_directory(str(folder), exist_ok=False, clear=False) == str(folder)
    (folder / "old").write_text("x")
    with pytest.raises(FileExistsError, match="not empty.*exist_ok=True to replace it"):
        local_directory(str(folder), exist_ok=False, clear=True)
    local_directory(str(folder), exist_ok=True, clear=False)
    assert os.listdir(folder) == ["old"], "without clear the old files stay (upstream's CloudUploader)"
    local_directory(str(folder), exist_ok=True, clear=True)
    assert os.listdir(folder) == []
