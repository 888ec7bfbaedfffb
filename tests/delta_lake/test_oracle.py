"""The generated-history oracle on real Delta Lake: histories Delta Lake writes through Spark SQL, followed four ways.

Hypothesis draws a table (deletion vectors on or off, the Change Data Feed on or off, column mapping by name or
none, partitioned by a string column whose values need escaping in paths, or not) and a history of Spark SQL
commands on it: INSERT, UPDATE, DELETE, MERGE, OPTIMIZE, an INSERT OVERWRITE of the same rows, the feed switched on
and off, RESTORE to an earlier version. Between random steps the job runs with Spark's reader (the table by name)
and delta-rs's (its folder), each in append and mirror mode (`tests.delta_lake.followed`), and every dataset is
compared with the plain-Python replay of the stated semantics after every run: a mirror holds the table's rows as
Delta Lake reads them, an append dataset what each run's version had that the previous run's did not.
`tests/incremental/test_oracle.py` runs the same comparison on histories delta-rs writes.

The test runs once in a classic session and once over Spark Connect (as Databricks Connect and serverless clients
read a table). ``MDS_DELTA_ORACLE_EXAMPLES`` sets the number of histories of each (default 12, about 3 minutes in
a classic session here: each Delta command is a Spark job).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.delta_lake.followed import Followed, latest_version

EXAMPLES = int(os.environ.get("MDS_DELTA_ORACLE_EXAMPLES", "12"))
pytestmark = pytest.mark.timeout(3600)

#: Partition values a Databricks user meets: a space, a colon and a percent sign (escaped in file paths), and the
#: empty string (NULL by the protocol).
PARTITION_VALUES = ("a b", "x:y", "50%", "", "plain")


@dataclass(frozen=True)
class Table:
    """How the drawn table is created."""

    vectors: bool
    feed: bool
    column_mapping: bool
    partitioned: bool

    def create(self, name: str) -> str:
        properties = {
            "delta.enableDeletionVectors": str(self.vectors).lower(),
            "delta.enableChangeDataFeed": str(self.feed).lower(),
        }
        if self.column_mapping:
            properties.update(
                {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}
            )
        listed = ", ".join(f"'{key}' = '{value}'" for key, value in properties.items())
        partitioning = " PARTITIONED BY (p)" if self.partitioned else ""
        return f"CREATE TABLE {name} (id BIGINT, v STRING, p STRING) USING delta{partitioning} TBLPROPERTIES ({listed})"


tables = st.builds(Table, st.booleans(), st.booleans(), st.booleans(), st.booleans())

#: One step: a command's kind and the numbers that pick its rows. ``run`` runs the job, the rest are Spark SQL.
steps = st.one_of(
    st.tuples(st.just("insert"), st.integers(1, 4), st.integers(0, 9)),
    st.tuples(st.just("update"), st.integers(2, 4), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.integers(2, 4), st.integers(0, 3)),
    st.tuples(st.just("merge"), st.integers(1, 3), st.integers(0, 9)),
    st.tuples(st.just("optimize"), st.just(0), st.just(0)),
    st.tuples(st.just("overwrite"), st.just(0), st.just(0)),
    st.tuples(st.just("feed"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("restore"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("run"), st.just(0), st.just(0)),
)
histories = st.lists(steps, min_size=3, max_size=8)

_names = itertools.count()


class History:
    """The table's SQL, with fresh ids for every inserted row so that ``id`` stays a key in every version."""

    def __init__(self, spark: Any, name: str) -> None:
        self.spark, self.name = spark, name
        self.next_id = itertools.count(1)
        self.first_version = 0

    def rows(self, count: int, seed: int) -> str:
        values = []
        for _ in range(count):
            row_id = next(self.next_id)
            partition = PARTITION_VALUES[(row_id + seed) % len(PARTITION_VALUES)]
            values.append(f"({row_id}, 'v{row_id}-{seed}', '{partition}')")
        return ", ".join(values)

    def apply(self, kind: str, first: int, second: int) -> None:
        sql, name = self.spark.sql, self.name
        if kind == "insert":
            sql(f"INSERT INTO {name} VALUES {self.rows(first, second)}")
        elif kind == "update":
            sql(f"UPDATE {name} SET v = concat(v, '+') WHERE id % {first} = {second % first}")
        elif kind == "delete":
            sql(f"DELETE FROM {name} WHERE id % {first} = {second % first}")
        elif kind == "merge":  # one existing id (if any) updated, new rows inserted
            source = f"(SELECT id, concat(v, '~') AS v, p FROM {name} WHERE id % 3 = {second % 3} LIMIT 1)"
            fresh = f"(SELECT * FROM VALUES {self.rows(first, second)} AS f(id, v, p))"
            sql(
                f"MERGE INTO {name} t USING ({source} UNION ALL {fresh}) s ON t.id = s.id "
                f"WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"
            )
        elif kind == "optimize":
            sql(f"OPTIMIZE {name}")
        elif kind == "overwrite":  # the same rows in new files: nothing appended, nothing removed
            sql(f"INSERT OVERWRITE {name} SELECT * FROM {name}")
        elif kind == "feed":
            sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = '{str(bool(first)).lower()}')")
        elif kind == "restore":
            latest = latest_version(self.spark, name)
            target = max(self.first_version, latest - first)
            sql(f"RESTORE TABLE {name} TO VERSION AS OF {target}")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    # No shrinking: each step is a Spark job, and the drawn history is printed as it failed.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(table=tables, history=histories)
def test_generated_histories_agree_with_the_replay_on_both_readers_and_both_modes(delta_session, table, history):
    spark = delta_session
    name = f"default.oracle{next(_names)}_{os.getpid()}"
    spark.sql(table.create(name))
    writer = History(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES {writer.rows(3, 0)}")
    writer.first_version = latest_version(spark, name)
    with tempfile.TemporaryDirectory(prefix="delta-oracle-") as root:
        followed = Followed(spark, name, Path(root), ["id", "v", "p"], ["id"])
        followed.catch_up()
        for kind, first, second in history:
            if kind == "run":
                followed.catch_up()
            else:
                writer.apply(kind, first, second)
        followed.catch_up()
    spark.sql(f"DROP TABLE {name}")
