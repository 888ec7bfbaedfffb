"""Table names reach Spark SQL quoted, and DESCRIBE HISTORY failures other than "not a Delta table" surface.

Spark here has no Delta SQL extension (its jars come from Maven, which this machine cannot reach), so a small
stand-in plays a Delta-enabled session: it answers DESCRIBE HISTORY only for identifiers spelled as Spark would
parse them, and otherwise fails as Spark's parser does. (On the real local Spark, DESCRIBE HISTORY is a parse error,
which must keep meaning "no version": tests/spark/test_sources.py reads tables by name there.)
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pyspark.errors import AnalysisException, ParseException

from streaming.spark.table_input import quote_table_name, resolve


class DeltaReader:
    def __init__(self, session: DeltaSession) -> None:
        self.session = session
        self.options: dict[str, Any] = {}

    def format(self, name: str) -> DeltaReader:
        return self

    def option(self, key: str, value: Any) -> DeltaReader:
        self.options[key] = value
        return self

    def table(self, identifier: str) -> str:
        self.session.reads.append((identifier, dict(self.options)))
        return f"frame of {identifier}"

    def load(self, path: str) -> Any:
        self.session.reads.append((path, dict(self.options)))
        return type("Frame", (), {"schema": "struct<id:bigint>"})()


class DeltaSession:
    """Stands in for a SparkSession with Delta: `history` maps identifiers, as Spark must receive them, to versions."""

    def __init__(self, history: dict[str, int], failure: Exception | None = None) -> None:
        self.history = history
        self.failure = failure
        self.statements: list[str] = []
        self.reads: list[tuple[str, dict[str, Any]]] = []

    @property
    def read(self) -> DeltaReader:
        return DeltaReader(self)

    def sql(self, text: str) -> Any:
        self.statements.append(text)
        identifier = re.fullmatch(r"DESCRIBE HISTORY (.+) LIMIT 1", text).group(1)  # type: ignore[union-attr]
        if self.failure is not None:
            raise self.failure
        if identifier not in self.history:
            raise ParseException(message=f"[PARSE_SYNTAX_ERROR] Syntax error at or near '-'. == SQL == {text}")
        rows = [{"version": self.history[identifier]}]
        return type("Result", (), {"collect": lambda self: rows})()


@pytest.mark.parametrize(
    "name, quoted",
    [
        ("orders", "`orders`"),
        ("main.sales.daily-orders", "`main`.`sales`.`daily-orders`"),
        ("`main`.`we.ird`.t", "`main`.`we.ird`.`t`"),
        ("main.`tick``s`.t", "`main`.`tick``s`.`t`"),
        ("main.sales.a`b", "`main`.`sales`.`a``b`"),
    ],
)
def test_table_names_are_quoted_per_part(name: str, quoted: str):
    assert quote_table_name(name) == quoted


@pytest.mark.parametrize("name", ["main..t", "main.sales.", "`open.t", "`a`b.t"])
def test_malformed_table_names_are_refused_with_the_name(name: str):
    with pytest.raises(ValueError) as caught:
        quote_table_name(name)
    assert repr(name) in str(caught.value)


def test_a_name_that_needs_backticks_gets_its_version():
    session = DeltaSession({"`main`.`sales`.`daily-orders`": 7})
    frame, source = resolve("main.sales.daily-orders", session)
    assert session.statements == ["DESCRIBE HISTORY `main`.`sales`.`daily-orders` LIMIT 1"]
    assert source.version == 7 and source.name == "main.sales.daily-orders"
    assert session.reads == [("`main`.`sales`.`daily-orders`", {"versionAsOf": 7})]


def test_a_delta_path_with_a_backtick_is_escaped():
    session = DeltaSession({"delta.`/data/we``ird`": 3})
    _, source = resolve("/data/we`ird", session)
    assert "DESCRIBE HISTORY delta.`/data/we``ird` LIMIT 1" in session.statements
    assert source.version == 3


def test_history_errors_surface():
    denied = AnalysisException(message="[INSUFFICIENT_PERMISSIONS] User does not have SELECT on table main.sales.t.")
    with pytest.raises(AnalysisException, match="INSUFFICIENT_PERMISSIONS"):
        resolve("main.sales.t", DeltaSession({}, failure=denied))


def test_a_table_that_is_not_delta_has_no_version():
    not_delta = AnalysisException(message="[DELTA_ONLY_OPERATION] DESCRIBE HISTORY is only supported for Delta tables.")
    session = DeltaSession({}, failure=not_delta)
    _, source = resolve("main.sales.parquet_table", session)
    assert source.version is None
    assert session.reads == [("`main`.`sales`.`parquet_table`", {})]
