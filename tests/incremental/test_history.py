"""The history model (`streaming.delta.history`) on what each source gives: commit files and DESCRIBE HISTORY.

The operation names are checked against how delta-io/delta's ``DeltaOperations.scala`` builds them (``ReplaceTable``
is named ``s"${if (orCreate) "CREATE OR " else ""}REPLACE TABLE${if (asSelect) " AS SELECT" else ""}"``), and
the Spark reader's window is built from ``DESCRIBE HISTORY`` rows as a Databricks runtime returns them.
"""

from __future__ import annotations

import itertools
import json

import pytest

from streaming.delta.history import (
    DATA_CHANGING_OPERATIONS,
    REPLACE_OPERATIONS,
    FileAction,
    HistoryUnavailableError,
    TableCommit,
    TableWindow,
    feed_at_version,
    history_commit,
    parse_commit,
)
from streaming.spark.table_changes import SparkDeltaChanges

CDF = "delta.enableChangeDataFeed"


def test_every_replace_table_name_delta_records_is_a_replace():
    names = {
        f"{'CREATE OR ' if or_create else ''}REPLACE TABLE{' AS SELECT' if as_select else ''}"
        for or_create, as_select in itertools.product((False, True), repeat=2)
    }
    assert names | {"RESTORE", "CLONE"} == set(REPLACE_OPERATIONS)
    assert "CREATE OR REPLACE TABLE AS SELECT" in DATA_CHANGING_OPERATIONS  # saveAsTable(mode="overwrite")
    for maintenance in ("OPTIMIZE", "REORG", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES", "COMPUTE STATS"):
        assert not history_commit(1, maintenance, {}).changes_data
    assert history_commit(1, "MERGE", {}).changes_data and history_commit(1, "WRITE", {"mode": "Append"}).changes_data


def _commit(version: int, *actions: dict) -> TableCommit:
    return parse_commit(version, [json.dumps(action) for action in actions], f"commit {version}")


def _add(path: str, data_change: bool = True) -> dict:
    return {"add": {"path": path, "dataChange": data_change, "partitionValues": {}, "size": 1}}


def _remove(path: str, data_change: bool = True) -> dict:
    return {"remove": {"path": path, "dataChange": data_change}}


def _info(operation: str, **parameters: str) -> dict:
    return {"commitInfo": {"operation": operation, "operationParameters": parameters}}


def test_changed_files_leave_out_rearrangements_and_cancel_what_came_and_went():
    window = TableWindow(
        0,
        4,
        (
            _commit(1, _info("WRITE"), _add("a"), _add("b")),
            _commit(2, _info("OPTIMIZE"), _remove("a", False), _remove("old", False), _add("c", False)),
            _commit(3, _info("DELETE"), _remove("b"), _add("b2")),
            _commit(4, _info("UPDATE"), _remove("c"), _add("c2")),
        ),
        feed_at_start=True,
    )
    added, removed = window.changed_files()
    assert sorted(action.path for action, _ in added) == ["a", "b2", "c2"]
    assert [(action.path, version) for action, version in removed] == [("c", 4)]
    assert window.changes_data and not TableWindow(1, 2, window.commits[1:2], True).changes_data


def test_a_deletion_vector_makes_a_different_file():
    vector = {"storageType": "u", "pathOrInlineDv": "ab", "offset": 1, "sizeInBytes": 4, "cardinality": 1}
    commit = _commit(
        1, _info("DELETE"), _remove("f"), {"add": {"path": "f", "dataChange": True, "deletionVector": vector}}
    )
    (added,), (removed,) = TableWindow(0, 1, (commit,), True).changed_files()
    assert added[0].key != removed[0].key and added[0].deletion_vector == "u:ab@1"


def test_the_feed_setting_follows_each_commit_of_the_window():
    on = {"metaData": {"configuration": {CDF: "true"}, "schemaString": "{}"}}
    off = {"metaData": {"configuration": {CDF: "false"}, "schemaString": "{}"}}
    commits = (
        _commit(1, _info("SET TBLPROPERTIES"), off),
        _commit(2, _info("WRITE"), _add("x")),
        _commit(3, _info("SET TBLPROPERTIES"), on),
    )
    assert not TableWindow(0, 3, commits, True).feed_enabled_throughout()
    assert TableWindow(2, 3, commits[2:], False).feed_enabled_throughout()
    assert not TableWindow(2, 3, (_commit(3, _info("WRITE"), _add("y")),), None).feed_enabled_throughout()


def test_the_feed_setting_from_describe_history_rows():
    history = [
        history_commit(0, "CREATE TABLE AS SELECT", {"properties": json.dumps({CDF: "true"})}),
        history_commit(1, "WRITE", {"mode": "Append"}),
        history_commit(2, "UNSET TBLPROPERTIES", {"properties": json.dumps([CDF]), "ifExists": "true"}),
        history_commit(3, "SET TBLPROPERTIES", {"properties": json.dumps({CDF: "true"})}),
        history_commit(4, "CREATE OR REPLACE TABLE AS SELECT", {"properties": "{}"}),
        history_commit(5, "RESTORE", {"version": "1"}),
    ]
    assert [feed_at_version(history, version) for version in range(6)] == [True, True, False, True, False, None]
    assert feed_at_version(history[1:], 3) is None, "a history that does not reach version 0 cannot say"
    assert TableWindow(3, 4, (history[4],), True).replacements() == ["version 4 (CREATE OR REPLACE TABLE AS SELECT)"]


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def collect(self):
        return self.rows


class _HistorySession:
    """What the Spark reader asks a Databricks session: DESCRIBE HISTORY and SHOW TBLPROPERTIES."""

    def __init__(self, history, properties):
        self.history, self.properties = history, properties

    def sql(self, text):
        if text.startswith("DESCRIBE HISTORY"):
            return _Rows(self.history)
        if text.startswith("SHOW TBLPROPERTIES"):
            return _Rows([{"key": key, "value": value} for key, value in self.properties.items()])
        raise AssertionError(text)


def _row(version, operation, **parameters):
    return {"version": version, "operation": operation, "operationParameters": parameters}


def test_the_spark_readers_window_comes_from_describe_history():
    history = [_row(v, "WRITE", mode="Append") for v in range(30, 40)]  # retention dropped versions 0..29
    reader = SparkDeltaChanges(_HistorySession(history[::-1], {CDF: "true"}), "main.default.events", 39)
    window = reader.window(35)
    assert [commit.version for commit in window.commits] == [36, 37, 38, 39] and not window.files_known
    assert window.feed_enabled_throughout(), "nothing in the window changed it: today's setting was its setting"
    switched = [*history[:-1], _row(39, "SET TBLPROPERTIES", properties=json.dumps({CDF: "true"}))]
    window = SparkDeltaChanges(_HistorySession(switched, {CDF: "true"}), "t", 39).window(35)
    assert not window.feed_enabled_throughout(), "the setting before the switch cannot be known here"
    with pytest.raises(HistoryUnavailableError, match="no longer lists version 21") as missing:
        SparkDeltaChanges(_HistorySession(history, {}), "t", 39).window(20)
    assert missing.value.version == 21


def test_a_window_needs_one_commit_per_version():
    with pytest.raises(ValueError, match="one commit per version"):
        TableWindow(0, 2, (_commit(2, _info("WRITE")),), True)
    assert FileAction("p", True).key == ("p", None)
