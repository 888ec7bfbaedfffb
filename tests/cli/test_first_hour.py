"""What a new user types first, answered in the command line's own words: a folder that does not exist, an
index.json given in place of its folder, a pickled column (named by its option, --allow-unsafe-types), and arrays
shown on one line."""

from __future__ import annotations

import numpy as np
import pytest

from streaming import MDSWriter
from tests.cli.conftest import run_cli

DATASET_COMMANDS = ["inspect", "verify", "rebuild-index", "merge-index", "vacuum", "simulate"]


def extra_args(command: str) -> list[str]:
    return ["--batch-size", "4"] if command == "simulate" else []


@pytest.fixture
def pickled(tmp_path):
    with MDSWriter(out=str(tmp_path / "ds"), columns={"a": "ndarray:int32", "p": "pkl"}) as writer:
        for i in range(3):
            writer.write({"a": np.arange(12, dtype=np.int32).reshape(3, 4) + i, "p": {"x": i}})
    return tmp_path / "ds"


@pytest.mark.parametrize("command", DATASET_COMMANDS)
def test_a_folder_that_does_not_exist_is_named_as_such(command, tmp_path):
    missing = str(tmp_path / "nope")
    code, out, err = run_cli(command, missing, *extra_args(command))
    assert code == 2 and out == ""
    assert err == (
        f"mds-streaming {command}: error: {missing} does not exist: pass the folder that holds the dataset's "
        "index.json\n"
    )


@pytest.mark.parametrize("command", DATASET_COMMANDS)
def test_an_index_file_in_place_of_its_folder_says_to_pass_the_folder(command, pickled):
    code, _, err = run_cli(command, str(pickled / "index.json"), *extra_args(command))
    assert code == 2
    assert err == (
        f"mds-streaming {command}: error: {pickled}/index.json is a dataset's index file: pass its folder instead "
        f"(mds-streaming {command} {pickled})\n"
    )
    assert "NotADirectoryError" not in err


def test_inspect_of_a_pickled_column_names_the_command_line_option(pickled):
    code, _, err = run_cli("inspect", str(pickled))
    assert code == 2
    assert "--allow-unsafe-types" in err and "allow_unsafe_types=True" not in err
    code, out, _ = run_cli("inspect", str(pickled), "--allow-unsafe-types")
    assert code == 0 and "p: {'x': 2}" in out


def test_verify_of_a_pickled_column_names_the_command_line_option(pickled):
    code, out, _ = run_cli("verify", str(pickled))
    assert code == 1
    assert "pass --allow-unsafe-types" in out and "allow_unsafe_types=True" not in out
    assert run_cli("verify", str(pickled), "--allow-unsafe-types")[0] == 0


def test_inspect_shows_an_array_on_one_line(pickled):
    code, out, _ = run_cli("inspect", str(pickled), "--allow-unsafe-types", "--samples", "1")
    assert code == 0
    assert "  a: array([[ 0, 1, 2, 3], [ 4, 5, 6, 7], [ 8, 9, 10, 11]], dtype=int32)\n" in out
    assert "\\n" not in out
