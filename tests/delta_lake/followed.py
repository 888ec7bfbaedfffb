"""A Delta table written by Delta Lake through Spark SQL and followed by the incremental job four ways at once.

Spark's reader reads the table by name (as the scheduled job does on Databricks), delta-rs its folder (as
``mds-streaming incremental`` does without Spark: the engine-neutral `streaming.incremental.incremental_to_mds`),
each in append and mirror mode. After every run each dataset is compared with the plain-Python replay of the
stated semantics (`tests.incremental.model`): a mirror holds the table's rows, an append dataset what each run's
new version had that the previous run's did not. The table's rows are read with Delta Lake's own reader when the
run is made, so a later VACUUM or RESTORE cannot change what the oracle expects.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.incremental import incremental_to_mds as delta_rs_incremental_to_mds
from streaming.spark import incremental_to_mds
from tests.incremental.model import dataset_rows, normal

SPARK = "spark"
DELTA_RS = "delta-rs"


def table_location(spark: Any, name: str) -> str:
    """The table's folder (what delta-rs reads)."""
    return spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"].removeprefix("file:")


def latest_version(spark: Any, name: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()[0]["version"])


def table_rows(spark: Any, name: str, columns: Sequence[str]) -> Counter:
    """The table's rows now, as Delta Lake's reader gives them, in the oracle's normal form."""
    rows = spark.sql(f"SELECT {', '.join(f'`{c}`' for c in columns)} FROM {name}").collect()
    return Counter(tuple(normal(_as_utc(row[c])) for c in columns) for row in rows)


def _as_utc(value: Any) -> Any:
    """A ``TIMESTAMP_NTZ`` value (a naive datetime) read as UTC wall-clock time, the model's spelling."""
    if isinstance(value, datetime.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=datetime.timezone.utc)
    return value


@dataclass
class Followed:
    """The table ``name`` and its four datasets under ``root``; ``readers`` picks Spark's, delta-rs's or both."""

    spark: Any
    name: str
    root: Path
    columns: list[str]
    key: list[str]
    readers: Sequence[str] = (SPARK, DELTA_RS)
    options: dict[str, Any] = field(default_factory=dict)
    appended: Counter = field(default_factory=Counter)
    previous: Counter | None = None
    results: dict[str, Any] = field(default_factory=dict)

    def out(self, reader: str, mode: str) -> Path:
        return self.root / f"{reader}-{mode}"

    def run(self, reader: str, mode: str) -> Any:
        """One run of the job with ``reader`` in ``mode``; its result."""
        key = self.key if mode == "mirror" else None
        out = str(self.out(reader, mode))
        if reader == SPARK:
            return incremental_to_mds(
                self.name, out, spark=self.spark, mode=mode, key=key, progress=False, **self.options
            )
        path = table_location(self.spark, self.name)
        return delta_rs_incremental_to_mds(path, out, mode=mode, key=key, progress=False, **self.options)

    def catch_up(self, skip: Sequence[str] = ()) -> dict[str, Any]:
        """Run every dataset (but those named in ``skip``) up to the table's newest version and check each against
        the replay; the results by ``"<reader>-<mode>"``."""
        now = table_rows(self.spark, self.name, self.columns)
        self.appended = now if self.previous is None else self.appended + (now - self.previous)
        self.previous = now
        for reader in self.readers:
            for mode in ("append", "mirror"):
                if f"{reader}-{mode}" in skip:
                    continue
                self.results[f"{reader}-{mode}"] = self.run(reader, mode)
                expected = now if mode == "mirror" else self.appended
                held = dataset_rows(str(self.out(reader, mode)), self.columns)
                assert held == expected, (reader, mode, self.results[f"{reader}-{mode}"])
        return self.results
