"""The other writer under Spark's reader: histories delta-rs writes, read by name through Delta Lake on Spark.

`tests/incremental/test_oracle.py` and `test_mirror.py` follow generated delta-rs histories (with the commits
Databricks writes that delta-rs cannot, written by hand to the protocol) with delta-rs's reader. Here the same
strategies' tables are registered in the Spark catalog by location and followed with Spark's reader, the table by
name, as the scheduled job reads on Databricks: in append mode with the feed where it can be read and with the
changed files (`histories`), and in mirror mode (`keyed_histories`, ``id`` unique in every version). After every run
each dataset must hold what the plain-Python replay of the same history says (`tests.incremental.model`).

A run may stop only after a VACUUM removed what its window needs, with `IncrementalHistoryError`: append then
takes the documented way out (``resync=True``); a mirror by name cannot resync (documented), so its subject stops
there. ``MDS_DELTA_RS_HISTORIES`` sets the number of histories of each mode (default 5).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from streaming.incremental.change import IncrementalHistoryError
from streaming.spark import incremental_to_mds
from tests.incremental.histories import Crash, Run, check_table, histories, keyed_histories
from tests.incremental.model import Run as Committed
from tests.incremental.model import TableModel, dataset_rows, mirror, replay

EXAMPLES = int(os.environ.get("MDS_DELTA_RS_HISTORIES", "5"))
pytestmark = pytest.mark.timeout(3600)
_names = itertools.count()


@dataclass
class Subject:
    """One dataset following the table by name with one mode and ``change_data_feed`` setting."""

    out: str
    mode: str
    change_data_feed: bool | None
    runs: list[Committed] = field(default_factory=list)
    columns: tuple[str, ...] = ()
    stopped: bool = False

    def run(self, spark: Any, name: str, model: TableModel) -> None:
        held = self.runs[-1].version if self.runs else None
        key = ["id"] if self.mode == "mirror" else None
        options: dict[str, Any] = {"spark": spark, "mode": self.mode, "key": key, "progress": False}
        try:
            result = incremental_to_mds(name, self.out, change_data_feed=self.change_data_feed, **options)
            resync = False
        except IncrementalHistoryError as err:
            assert model.vacuumed_after is not None and held is not None and held < model.vacuumed_after, str(err)
            assert "resync=True" in str(err), str(err)
            if self.mode == "mirror":
                self.stopped = True
                return
            result, resync = incremental_to_mds(name, self.out, resync=True, **options), True
        if result.method == "up_to_date":
            assert result.version == held
            return
        assert (result.previous_version, result.version) == (held, model.version), result
        if held is None:
            self.columns = model.versions[result.version].columns
        self.runs.append(Committed(held, result.version, resync=resync))

    def check(self, model: TableModel) -> None:
        if not self.runs or self.stopped:
            return
        semantics: Callable[..., Any] = mirror if self.mode == "mirror" else replay
        expected = semantics(model, self.runs, self.columns)
        held = dataset_rows(self.out, self.columns)
        assert held == expected, (
            f"{self.mode} dataset (change_data_feed={self.change_data_feed}) after runs {self.runs}: "
            f"{sum((held - expected).values())} rows too many, {sum((expected - held).values())} missing"
        )


def _follow(spark: Any, steps: list, subjects: list[Subject], work: Path) -> None:
    """Apply ``steps`` with delta-rs (the first creates the table, then registered by location), running every
    subject with Spark's reader at each run step and checking it against the replay."""
    table, model = work / "table", TableModel()
    name = f"default.delta_rs{next(_names)}_{os.getpid()}"
    try:
        for step in steps:
            if isinstance(step, Crash):
                continue  # killed runs are delta-rs-side tests (test_mirror.py); here every run finishes
            if isinstance(step, Run):
                for subject in subjects:
                    if not subject.stopped:
                        subject.run(spark, name, model)
                        subject.check(model)
                continue
            step.apply(table, model)
            check_table(table, model)
            if not spark.catalog.tableExists(name):
                spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{table}'")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each run is a Spark job; the history is printed
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(steps=histories(max_steps=8))
def test_delta_rs_histories_appended_by_name_agree_with_the_replay(delta_spark, steps):
    work = Path(tempfile.mkdtemp(prefix="delta-rs-by-name-"))
    try:
        subjects = [Subject(str(work / "auto"), "append", None), Subject(str(work / "files"), "append", False)]
        _follow(delta_spark, steps, subjects, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@SETTINGS
@given(steps=keyed_histories(max_steps=8))
def test_delta_rs_histories_mirrored_by_name_agree_with_the_replay(delta_spark, steps):
    work = Path(tempfile.mkdtemp(prefix="delta-rs-by-name-"))
    try:
        _follow(delta_spark, steps, [Subject(str(work / "mirror"), "mirror", None)], work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
