"""The snapshot is built from one read of the log, and the changes between it and an older version reuse it
(issue 50): every log file a run needs is opened once, the checkpoint's files included. The tables are delta-rs's;
the V2 checkpoint with sidecars is Delta Lake's own (``tests/fixtures/delta/v2_sidecars``), checked against
Spark's rows of each version.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.delta.changes_between import read_window
from streaming.delta.errors import DeltaLogError, HistoryUnavailableError
from streaming.delta.scan import snapshot_rows
from streaming.delta.snapshot import Snapshot
from streaming.storage.table_files import NoLinkFiles

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "delta" / "v2_sidecars"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every file the package opens of a local table, counted by its path under the table."""
    counts: Counter = Counter()
    plain = NoLinkFiles.open_input_file

    def counting(self, path: str):
        counts[path.strip("/")] += 1
        return plain(self, path)

    monkeypatch.setattr(NoLinkFiles, "open_input_file", counting)
    return counts


def _table(path: Path, versions: int, configuration: dict[str, str] | None = None) -> str:
    from deltalake import write_deltalake

    table = str(path / "table")
    for number in range(versions):
        write_deltalake(
            table,
            pa.table({"id": [number]}),
            mode="append" if number else "error",
            configuration=None if number else configuration,
        )
    return table


def _log(counts: Counter) -> Counter:
    return Counter({path: count for path, count in counts.items() if path.startswith("_delta_log/")})


def test_a_window_after_the_checkpoint_reads_no_commit_again(tmp_path, opened):
    table = _table(tmp_path, 25, {"delta.checkpointInterval": "10"})  # checkpoints at 9 and 19
    snapshot = Snapshot.open(table)
    assert (snapshot.version, snapshot.log.checkpoint) == (24, 19)
    window = read_window(snapshot, 21)
    assert [commit.version for commit in window.commits] == [22, 23, 24] and window.feed_at_start is False
    read = _log(opened)
    assert set(read) == {f"_delta_log/{19:020d}.checkpoint.parquet"} | {
        f"_delta_log/{number:020d}.json" for number in range(20, 25)
    }
    assert set(read.values()) == {1}, read


def test_a_window_from_before_the_checkpoint_reads_each_older_commit_once(tmp_path, opened):
    table = _table(tmp_path, 25, {"delta.checkpointInterval": "10"})
    snapshot = Snapshot.open(table)
    window = read_window(snapshot, 15)
    assert [commit.version for commit in window.commits] == list(range(16, 25))
    assert window.feed_at_start is False and window.schema_at_start == snapshot.schema_string
    read = _log(opened)
    assert set(read.values()) == {1}, read
    assert {f"_delta_log/{number:020d}.json" for number in range(16, 25)} <= set(read)


def test_the_feed_at_a_start_log_cleanup_made_unreadable_is_known_until_the_windows_first_metadata_change(tmp_path):
    """Found by the long generated histories: log cleanup removed every commit and checkpoint up to ``start``, and a
    commit of the window sets new metadata. The settings at ``start`` are still those of the version before that
    commit, which the snapshot's read passed; the run reads the feed instead of diffing two snapshots."""
    from deltalake import DeltaTable

    settings = {"delta.checkpointInterval": "10", "delta.enableChangeDataFeed": "true"}
    table = _table(tmp_path, 25, settings)  # checkpoints at 9 and 19
    DeltaTable(table).alter.set_table_properties({"delta.appendOnly": "false"})  # version 25: new metadata
    log = Path(table) / "_delta_log"
    for name in [*(f"{number:020d}.json" for number in range(0, 19)), f"{9:020d}.checkpoint.parquet"]:
        (log / name).unlink()  # what log cleanup leaves: the commits from the newest checkpoint's own on
    snapshot = Snapshot.open(table)
    with pytest.raises(HistoryUnavailableError):
        Snapshot.open(table, 18)  # the start itself can no longer be rebuilt
    window = read_window(snapshot, 18)
    assert [commit.version for commit in window.commits] == list(range(19, 26))
    assert window.feed_at_start is True and window.schema_at_start == snapshot.schema_string


def test_a_commit_gone_before_the_window_is_named(tmp_path):
    table = _table(tmp_path, 25, {"delta.checkpointInterval": "10"})
    (Path(table) / "_delta_log" / f"{17:020d}.json").unlink()
    snapshot = Snapshot.open(table)  # from the checkpoint at 19: the gap is not on its way
    with pytest.raises(HistoryUnavailableError) as gone:
        read_window(snapshot, 15)
    assert gone.value.version == 17


def test_a_folder_without_a_log_and_a_version_past_the_newest_are_named(tmp_path):
    with pytest.raises(DeltaLogError, match="is not a Delta table"):
        Snapshot.open(str(tmp_path))
    table = _table(tmp_path, 2)
    with pytest.raises(DeltaLogError, match=r"has no version 5; its newest is 1\."):
        Snapshot.open(table, 5)


def test_v2_checkpoints_with_sidecars_give_sparks_rows_at_every_version(tmp_path, opened):
    expected = json.loads(FIXTURE.with_name(FIXTURE.name + ".expected.json").read_text())
    table = tmp_path / "v2"
    shutil.copytree(FIXTURE, table)
    for version, rows in expected.items():
        snapshot = Snapshot.open(str(table), int(version))
        got = snapshot_rows(snapshot, ["id", "v", "p"]).to_pylist()
        assert Counter((row["id"], row["v"], row["p"]) for row in got) == Counter(map(tuple, rows)), version
    opened.clear()
    newest = Snapshot.open(str(table))
    read = sorted(_log(opened))
    assert newest.log.checkpoint == 6 and len(read) == 3, read  # the V2 checkpoint, its sidecar, commit 7
    assert any("/_sidecars/" in path for path in read), read
