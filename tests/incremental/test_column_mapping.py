"""A column-mapped table (``delta.columnMapping.mode`` ``name``) takes the same per-file path as any other.

Its files hold the columns under physical names; before the one per-file reader (`streaming.delta.scan`), the
changed files of such a table were refused and a run read both versions whole, so a one-row change cost two full
reads. Here the reads are counted where the package opens a local table's files (`NoLinkFiles`, by descriptor).
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from streaming.dataset.local import LocalDataset
from streaming.incremental import incremental_to_mds
from streaming.storage.table_files import NoLinkFiles

COLUMN_MAPPING = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "text": [f"row {i}" for i in ids], "p": ["a", "b"] * (count // 2)}
    )


def _table(path: str, files: int, feed: bool = False) -> None:
    from deltalake import write_deltalake

    configuration = {**COLUMN_MAPPING, **({"delta.enableChangeDataFeed": "true"} if feed else {})}
    for number in range(files):
        write_deltalake(
            path,
            _rows(number * 100, 100),
            mode="append" if number else "error",
            partition_by=["p"],
            configuration=None if number else configuration,
        )


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every data file (outside ``_delta_log``) the package opens of a local table, in order."""
    paths: list[str] = []
    plain = NoLinkFiles.open_input_file

    def counting(self, path):
        if not path.strip("/").startswith("_delta_log"):
            paths.append(path.strip("/"))
        return plain(self, path)

    monkeypatch.setattr(NoLinkFiles, "open_input_file", counting)
    return paths


def _stored(out: str) -> Counter:
    return Counter((int(sample["id"]), sample["text"], sample["p"]) for sample in LocalDataset(out))


def _in_table(path: str) -> Counter:
    """The table's rows as delta-rs's query engine reads them (it maps the physical names itself)."""
    from deltalake import DeltaTable, QueryBuilder

    rows = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT id, text, p FROM t").read_all()
    return Counter((row["id"], row["text"], row["p"]) for row in pa.table(rows).to_pylist())


@pytest.mark.parametrize("mode", ["append", "mirror"])
def test_a_one_row_change_to_a_column_mapped_table_reads_only_the_files_it_touched(tmp_path, opened, mode):
    from deltalake import DeltaTable

    table, out = str(tmp_path / "table"), str(tmp_path / mode)
    _table(table, 6)
    options = {"mode": mode, "key": ["id"]} if mode == "mirror" else {}
    incremental_to_mds(table, out, progress=False, **options)
    assert _stored(out) == _in_table(table)
    DeltaTable(table).update(predicate="id = 7", updates={"text": "'changed'"})
    version = DeltaTable(table).version()
    commit = (tmp_path / "table" / "_delta_log" / f"{version:020d}.json").read_text()
    files = DeltaTable(table).file_uris()
    opened.clear()
    result = incremental_to_mds(table, out, progress=False, **options)
    assert result.method == "snapshot_diff"
    assert len(opened) == 2, opened  # the file the update removed and the one it added, each once
    assert all(path.split("/")[-1] in commit for path in opened)
    assert len(files) == 12  # six appends, each a file per partition: ten were not read
    if mode == "mirror":
        assert _stored(out) == _in_table(table)
    else:
        assert (result.samples, result.unapplied_changes) == (1, 1)
        assert [row for row in _stored(out).elements() if row[0] == 7] == [(7, "row 7", "b"), (7, "changed", "b")]


def test_a_column_mapped_table_s_change_data_feed_is_read_file_by_file(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    table, out = str(tmp_path / "table"), str(tmp_path / "mirror")
    _table(table, 3, feed=True)
    incremental_to_mds(table, out, progress=False, mode="mirror", key=["id"])
    DeltaTable(table).delete("id = 3")
    DeltaTable(table).update(predicate="id = 104", updates={"text": "'updated'"})
    write_deltalake(table, _rows(900, 2), mode="append", partition_by=["p"])
    result = incremental_to_mds(table, out, progress=False, mode="mirror", key=["id"])
    assert (result.method, result.removed, result.samples) == ("change_data_feed", 2, 3)
    assert _stored(out) == _in_table(table)
