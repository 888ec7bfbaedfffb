"""The small things a new user trips on, each answered in words that name the fix: a mistyped scheme, a URL given
to LocalDataset, the command line's own options in its refusals, counts in the right number."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset
from streaming.cli import main
from streaming.storage import storage_for


@pytest.mark.parametrize(
    ("url", "meant"), [("gcs://bucket/ds", "gs://bucket/ds"), ("s4://bucket/ds", "s3://bucket/ds")]
)
def test_a_mistyped_scheme_suggests_the_registered_one(url, meant):
    with pytest.raises(ValueError, match=rf"unknown scheme '\w+' \(did you mean '{meant}'\?\)\. Valid choices: "):
        storage_for(url)


def test_an_unrelated_scheme_gets_no_suggestion():
    with pytest.raises(ValueError, match=r"unknown scheme 'zz'\. Valid choices: "):
        storage_for("zz://bucket/ds")


def test_local_dataset_given_a_url_says_how_to_read_it():
    with pytest.raises(FileNotFoundError) as caught:
        LocalDataset("s4://bucket/ds")
    assert str(caught.value) == (
        "LocalDataset reads a folder on this machine, and 's4://bucket/ds' is a URL (did you mean 's3://bucket/ds'?): "
        "stream it with StreamingDataset(remote='s4://bucket/ds'), or copy it here first "
        "(mds-streaming cp s4://bucket/ds <folder>)."
    )


def test_local_dataset_of_a_missing_folder_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        LocalDataset(str(tmp_path / "missing"))


@pytest.fixture
def parquet(tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "text": ["a", "b", "c"]}), path)
    return path


def test_convert_counts_one_shard_in_the_singular(parquet, tmp_path, capsys):
    assert main(["convert", str(parquet), str(tmp_path / "out"), "--workers", "1"]) == 0
    assert capsys.readouterr().out.startswith("wrote 3 samples in 1 shard (")


def test_convert_into_a_dataset_names_the_command_line_options(parquet, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert main(["convert", str(parquet), out, "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["convert", str(parquet), out, "--workers", "1"]) == 1
    error = capsys.readouterr().err
    assert "Choices: --mode overwrite to replace it, --mode append to add to the dataset there" in error
    assert "mode='" not in error


def test_an_uncreatable_local_cache_names_the_argument_and_the_default(tmp_path):
    from streaming import MDSWriter, StreamingDataset

    with MDSWriter(out=str(tmp_path / "ds"), columns={"x": "int"}) as writer:
        writer.write({"x": 1})
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    local = str(blocker / "cache")
    with pytest.raises(NotADirectoryError) as caught:
        StreamingDataset(remote=str(tmp_path / "ds"), local=local, batch_size=1)
    assert str(caught.value) == (
        f"Cache directory {local} (local=) cannot be created: Not a directory ({local}). Pass local= a folder you "
        "can create, or leave it out for a private temporary one."
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_variable_length_arrays_with_the_default_collate_name_the_column(tmp_path, workers):
    import numpy as np

    from streaming import MDSWriter, StreamingDataLoader, StreamingDataset

    with MDSWriter(out=str(tmp_path / "ds"), columns={"tokens": "ndarray:int32", "label": "int"}) as writer:
        for i in range(8):
            writer.write({"tokens": np.arange(i + 1, dtype=np.int32), "label": i})
    dataset = StreamingDataset(remote=str(tmp_path / "ds"), batch_size=4)
    with pytest.raises(RuntimeError) as caught:
        list(StreamingDataLoader(dataset, batch_size=4, num_workers=workers))
    assert str(caught.value).startswith(
        "StreamingDataLoader's default collate stacks each column of a batch into one tensor, and column(s) "
        "['tokens'] hold arrays of different shapes"
    )


def test_convert_and_inspect_list_the_columns_in_one_order(tmp_path, capsys):
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"zeta": [1, 2], "alpha": ["a", "b"], "mid": [1.0, 2.0]}), source)
    out = str(tmp_path / "out")
    assert main(["convert", str(source), out, "--workers", "1"]) == 0
    converted = capsys.readouterr().out.split("columns: ", 1)[1].strip()
    assert main(["inspect", out]) == 0
    listed = capsys.readouterr().out.split("--------\n", 1)[1].split("\n\n", 1)[0]
    assert [item.split("=")[0] for item in converted.split(", ")] == [line.split()[0] for line in listed.splitlines()]


def test_convert_progress_bar_says_what_it_counts(parquet, tmp_path):
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios
    from pathlib import Path

    # The bar shows only on a terminal: give the command one, 100 columns wide.
    terminal, its_end = pty.openpty()
    fcntl.ioctl(its_end, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-m", "streaming", "convert", str(parquet), str(tmp_path / "out"), "--workers", "1"]
    run = subprocess.run(command, stderr=its_end, stdout=subprocess.PIPE, env=environment, timeout=300)
    os.close(its_end)
    shown = os.read(terminal, 1 << 16).decode()
    os.close(terminal)
    assert run.returncode == 0
    assert "convert: 100%" in shown, shown
