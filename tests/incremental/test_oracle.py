"""The generated-history oracle: `incremental_to_mds` against a plain-Python replay of its stated semantics.

Hypothesis generates histories of a real delta-rs table (`tests.incremental.histories`: appends, updates, deletes,
merges, overwrites, OPTIMIZE and Z-order, RESTORE, the Change Data Feed switched on and off, a column added,
VACUUM, and Databricks' CREATE OR REPLACE TABLE AS SELECT, RESTORE, predictive optimization and VACUUM markers
written by hand), with the job run between random steps, sometimes twice at once. Two datasets follow every
history: one run with ``change_data_feed=None`` (the feed wherever it was on throughout) and one with ``False``
(the changed files). After every run both must hold exactly what `tests.incremental.model.replay` says, the feed
must have been read wherever the semantics allow it, and a window of maintenance commits must have read nothing.
A run may stop only after a VACUUM removed what its window needs, with `IncrementalHistoryError`; the oracle then
takes the documented way out (``resync=True``) and checks its semantics too.

``MDS_ORACLE_EXAMPLES`` sets the number of histories (default 40; CI runs the default). Long histories with a
checkpoint every 10 versions, OPTIMIZE, VACUUM and log cleanup (`tests.incremental.histories.long_histories`) run
``MDS_ORACLE_LONG_EXAMPLES`` times (default 3): every bound on what the log declares must let them through.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings

from streaming.incremental import append
from streaming.incremental.change import IncrementalHistoryError
from streaming.incremental.result import IncrementResult
from streaming.spark import incremental_to_mds
from tests.incremental.histories import Race, Run, check_table, histories, long_histories
from tests.incremental.model import Run as Committed
from tests.incremental.model import TableModel, dataset_rows, replay

EXAMPLES = int(os.environ.get("MDS_ORACLE_EXAMPLES", "40"))
LONG_EXAMPLES = int(os.environ.get("MDS_ORACLE_LONG_EXAMPLES", "3"))


@dataclass
class Subject:
    """One dataset following the history, written with one ``change_data_feed`` setting."""

    out: str
    change_data_feed: bool | None
    runs: list[Committed] = field(default_factory=list)
    columns: tuple[str, ...] = ()
    feed_runs: int = 0

    @property
    def held(self) -> int | None:
        return self.runs[-1].version if self.runs else None


def _log_rebuilds(table: str, version: int) -> bool:
    """Whether the table's log still rebuilds ``version`` (a checkpoint at or before it and every commit after that
    checkpoint up to it, or every commit from 0). Where log cleanup took that away, the feed's setting and the
    schema at ``version`` can be unknown, and a run may diff the two versions' files instead of reading the feed."""
    names = os.listdir(os.path.join(table, "_delta_log"))
    commits = {int(name[:20]) for name in names if name[:20].isdigit() and name.endswith(".json")}
    checkpoints = {int(name[:20]) for name in names if name[:20].isdigit() and ".checkpoint." in name}
    starts = [0] + [checkpoint + 1 for checkpoint in checkpoints if checkpoint <= version]
    return any(all(number in commits for number in range(first, version + 1)) for first in starts)


def _commit_run(subject: Subject, result: IncrementResult, model: TableModel, *, resync: bool = False) -> None:
    """Record a run that returned, checking how it read the change against what the semantics allow."""
    if result.method == "up_to_date":
        assert result.version == subject.held
        return
    held, target = subject.held, result.version
    assert (result.previous_version, target) == (held, model.version)
    if held is None:
        subject.columns = model.versions[target].columns
    elif not resync:
        if model.only_maintenance(held, target):
            assert result.method == "no_data_change", f"maintenance only ({held}..{target}) read {result.method}"
        elif subject.change_data_feed is None and model.feed_gives(held, target) and _log_rebuilds(result.table, held):
            assert result.method == "change_data_feed", f"the feed was on throughout {held}..{target}"
            subject.feed_runs += 1
        elif subject.change_data_feed is False:
            assert result.method in ("snapshot_diff", "full_snapshot_diff", "no_data_change"), result.method
        if result.method == "no_data_change":  # allowed only where no row changed (e.g. a RESTORE to equal files)
            before, after = model.versions[held].rows, model.versions[target].rows
            assert replay(model, [Committed(None, held)], subject.columns) == replay(
                model, [Committed(None, target)], subject.columns
            ), f"{held}..{target} changed rows but the run read nothing ({len(before)} -> {len(after)} rows)"
    subject.runs.append(Committed(held, target, resync=resync))


def _run(subject: Subject, table: Path, model: TableModel) -> None:
    try:
        result = incremental_to_mds(str(table), subject.out, change_data_feed=subject.change_data_feed, progress=False)
    except IncrementalHistoryError as err:
        # Only a VACUUM after the version the dataset holds can take away what the change needs.
        assert model.vacuumed_after is not None and subject.held is not None
        assert subject.held < model.vacuumed_after, f"history error without a vacuum after {subject.held}: {err}"
        assert "resync=True" in str(err) and str(err.version) in str(err)
        result = incremental_to_mds(str(table), subject.out, resync=True, progress=False)
        assert result.method == "resync"
        _commit_run(subject, result, model, resync=True)
        return
    _commit_run(subject, result, model)


def _race(subject: Subject, table: Path, model: TableModel) -> None:
    """Two runs from the same state at once: both reach the commit before either commits; exactly one lands."""
    barrier = threading.Barrier(2, timeout=20)
    publish = append.commit_run
    outcomes: list[object] = []

    def meet_then_publish(*args, **kwargs):
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass  # the other run had nothing to publish
        return publish(*args, **kwargs)

    def attempt() -> None:
        try:
            outcomes.append(
                incremental_to_mds(str(table), subject.out, change_data_feed=subject.change_data_feed, progress=False)
            )
        except Exception as err:
            outcomes.append(err)

    with mock.patch.object(append, "commit_run", meet_then_publish):
        threads = [threading.Thread(target=attempt) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    results = [outcome for outcome in outcomes if isinstance(outcome, IncrementResult)]
    errors = [outcome for outcome in outcomes if not isinstance(outcome, IncrementResult)]
    if any(isinstance(error, IncrementalHistoryError) for error in errors):
        _run(subject, table, model)  # judged (and resynced) as a single run
        return
    committed = [result for result in results if result.method != "up_to_date"]
    assert len(outcomes) == 2 and len(committed) <= 1, f"two runs from one state both committed: {outcomes}"
    for error in errors:
        assert isinstance(error, RuntimeError) and "Another run updated" in str(error), repr(error)
    for result in committed:
        _commit_run(subject, result, model)


def _check(subject: Subject, model: TableModel) -> None:
    if not subject.runs:
        return
    expected = replay(model, subject.runs, subject.columns)
    held = dataset_rows(subject.out, subject.columns)
    assert held == expected, (
        f"dataset {subject.out} (change_data_feed={subject.change_data_feed}) after runs {subject.runs}: "
        f"{sum((held - expected).values())} rows too many, {sum((expected - held).values())} missing"
    )


@contextmanager
def _workdir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="mds-oracle-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _replay(steps: list, work: Path) -> list[Subject]:
    """Apply ``steps`` to a table in ``work`` and the model, running the job between them on a dataset reading the
    feed where it can and one reading the changed files; after every run each must hold what the model says."""
    table = work / "table"
    model = TableModel()
    subjects = [Subject(str(work / "auto"), None), Subject(str(work / "files"), False)]
    for step in steps:
        if isinstance(step, Race):
            for subject in subjects:
                _race(subject, table, model)
        elif isinstance(step, Run):
            for subject in subjects:
                _run(subject, table, model)
        else:
            step.apply(table, model)
            check_table(table, model)
            continue
        for subject in subjects:
            _check(subject, model)
    return subjects


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(histories())
def test_the_job_holds_what_the_semantics_say_after_every_generated_history(steps):
    with _workdir() as work:
        _replay(steps, work)


@settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(long_histories())
def test_the_job_holds_what_the_semantics_say_after_long_histories_with_checkpoints(steps):
    """Issue 45, item 6: no bound refuses a healthy table however long its history; windows start before, at and
    after its checkpoints, and runs held before a log cleanup resync as after VACUUM."""
    with _workdir() as work:
        _replay(steps, work)


@pytest.mark.slow  # hypothesis searches for each kind of history: about a minute
def test_the_oracle_reads_the_feed_and_the_files_in_the_histories_it_generates():
    """The strategy must reach both reading paths and the maintenance-only path, or the oracle proves little."""
    from hypothesis import find

    def reaches(kind: str):
        def predicate(steps) -> bool:
            return any(type(step).__name__ == kind for step in steps)

        return predicate

    for kind in ("SwitchFeed", "ReplaceAsSelect", "PredictiveOptimization", "Restore", "Vacuum", "Race", "AddColumn"):
        assert find(histories(), reaches(kind), settings=settings(database=None, max_examples=500))


@pytest.mark.parametrize("seed_history", ["feed", "files"])
def test_a_known_history_exercises_every_path(seed_history, tmp_path):
    """One fixed history through the same checks: the feed path, the files path, maintenance and a replace."""
    from tests.incremental import histories as h

    rows = [{"id": i, "grp": "a", "val": float(i), "nums": [i]} for i in range(5)]
    steps = [
        h.Create(rows, feed=seed_history == "feed"),
        Run(),
        h.Append([{"id": 9, "grp": "b", "val": -0.0}]),
        h.Update([1, 2], "u"),
        Run(),
        h.Optimize(zorder=False),
        h.PredictiveOptimization(),
        h.VacuumMarkers(),
        Run(),
        h.ReplaceAsSelect([], feed=None, same_rows=True),
        h.Delete([0]),
        Race(),
        h.Overwrite([{"id": 5, "grp": "c", "val": float("nan")}], same_rows=False),
        Run(),
    ]
    subjects = _replay(steps, tmp_path)
    assert (subjects[0].feed_runs > 0) == (seed_history == "feed")


def test_a_resync_after_a_column_was_widened_to_json_appends_nothing_the_dataset_holds(tmp_path):
    """A history the generated search found (shrunk by hand): ``nums`` is widened to JSON by a later append of an
    array with a NULL element, then a restore with a vacuumed history makes the job resync. The rows of the first
    run, stored as ``ndarray`` (one of them a masked NULL), must be identified as the table's rows are under the
    widened encoding, or resync appends them a second time."""
    import datetime
    from decimal import Decimal

    from tests.incremental import histories as h

    def at(micros: int) -> datetime.datetime:
        return datetime.datetime(1970, 1, 1, 0, 0, 0, micros, tzinfo=datetime.timezone.utc)

    first = [
        {"id": 26, "grp": "a", "val": 0.0, "ts": at(105), "blob": b"", "meta": {"k": "", "n": 0}, "nums": [-306, 1]},
        {"id": 0, "grp": "a", "val": 0.0, "ts": at(808), "blob": b"]B", "meta": {"k": "k", "n": -2}, "nums": None},
        {"id": 11, "grp": "a", "val": 0.0, "ts": None, "blob": None, "meta": None, "nums": None},
    ]
    steps = [
        h.Create(rows=first, feed=True),
        Run(),
        h.Append([{"id": 18, "grp": None, "val": 0.0, "amount": Decimal("-0.233"), "nums": [None, 0], "extra": 1}]),
        h.Vacuum(),
        Run(),
        h.Update([0], "u"),
        h.Optimize(False),
        h.Vacuum(),
        Run(),
        h.Restore(0, False),
        Run(),
    ]
    subjects = _replay(steps, tmp_path)
    assert any(run.resync for subject in subjects for run in subject.runs), [s.runs for s in subjects]


def test_a_restore_that_adds_back_a_file_optimize_had_compacted_appends_its_rows(tmp_path):
    """Another history the search found: a file appended after the last run is compacted by OPTIMIZE (its remove
    carries no data change), then RESTORE adds it back and removes the compacted file. The changed files are a
    multiset: the file's two adds both count against the compacted file's remove, so its row is appended once."""
    import datetime
    from decimal import Decimal

    from tests.incremental import histories as h

    first = {"id": 0, "grp": "a", "val": 0.0, "ts": datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)}
    first.update({"amount": None, "blob": b"", "meta": None, "nums": []})
    steps = [
        h.Create(rows=[first], feed=False),
        h.Append([{**first, "amount": Decimal("0.000"), "meta": {"k": "", "n": 0}}]),
        Run(),
        h.Append([{**first, "meta": {"k": "", "n": 0}}]),
        h.Optimize(False),
        h.Restore(0, False),
        Run(),
    ]
    _replay(steps, tmp_path)
