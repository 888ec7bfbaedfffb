"""Issue 45, item 1 and 5: a Delta table without rows, or without columns, read without Spark.

A table with no rows (created empty, or every file removed by a later commit) converts to an empty dataset with
the log's schema, in ``mds-streaming convert`` and ``dataframe_to_mds`` of its path alike, as ``dataframe_to_mds``
of an empty DataFrame writes one (and the reference's writer: ``{"shards": [], "version": 2}``); the scheduled job
over it writes the same empty dataset in both modes, and a later run appends or mirrors into it. A table whose
schema has no columns is named in one sentence. The tables are delta-rs's; the Delta Lake on Spark lane
(`tests/delta_lake/test_empty_tables.py`) runs the same on Spark's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from streaming import LocalDataset
from streaming.delta.errors import NoColumnsError
from streaming.incremental import incremental_to_mds
from tests.cli.conftest import run_cli

#: What the reference's MDSWriter (streaming-community 0.14.2) writes for no samples, and ours for none.
EMPTY_INDEX = {"shards": [], "version": 2}
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])


def _empty_table(path: Path, how: str) -> str:
    """A delta-rs table of `SCHEMA` with no rows: created so (``created``), or emptied by a DELETE (``deleted``)."""
    from deltalake import DeltaTable, write_deltalake

    table = str(path / "table")
    if how == "created":
        write_deltalake(table, SCHEMA.empty_table())
    else:
        write_deltalake(table, pa.table({"id": [1, 2], "name": ["a", "b"], "score": [0.5, 1.5]}, schema=SCHEMA))
        DeltaTable(table).delete()
    return table


def _columns(out: Path) -> dict[str, str]:
    return json.loads((out / "mds_conversion.json").read_text())["latest"]["columns"]


def _rows(out: Path) -> list[tuple]:
    return sorted((int(s["id"]), s["name"], float(s["score"])) for s in LocalDataset(str(out)))


@pytest.mark.parametrize("how", ["created", "deleted"])
def test_convert_writes_an_empty_dataset_with_the_logs_schema(tmp_path, how):
    table, out = _empty_table(tmp_path, how), tmp_path / "out"
    code, stdout, stderr = run_cli("convert", table, str(out))
    assert code == 0, stderr
    assert "wrote 0 samples in 0 shards" in stdout
    assert json.loads((out / "index.json").read_text()) == EMPTY_INDEX
    assert _columns(out) == {"id": "int64", "name": "str", "score": "float64"}
    assert len(LocalDataset(str(out))) == 0


@pytest.mark.parametrize("how", ["created", "deleted"])
def test_dataframe_to_mds_of_the_path_in_spark_without_delta_writes_the_same_empty_dataset(spark, tmp_path, how):
    """Spark here has no Delta reader, so the path is read with this package's reader and handed to Spark."""
    from streaming.spark import dataframe_to_mds

    table, out = _empty_table(tmp_path, how), tmp_path / "spark"
    result = dataframe_to_mds(table, str(out), spark=spark, progress=False)
    assert (result.samples, result.shards) == (0, 0)
    assert json.loads((out / "index.json").read_text()) == EMPTY_INDEX
    assert _columns(out) == {"id": "int64", "name": "str", "score": "float64"}


@pytest.mark.parametrize("how", ["created", "deleted"])
@pytest.mark.parametrize("mode", ["append", "mirror"])
def test_the_job_starts_on_an_empty_table_and_later_runs_fill_it(tmp_path, how, mode):
    from deltalake import DeltaTable, write_deltalake

    table, out = _empty_table(tmp_path, how), tmp_path / mode
    options = {"mode": mode, "key": ["id"]} if mode == "mirror" else {}
    first = incremental_to_mds(table, str(out), progress=False, **options)
    assert first.samples == 0 and first.version == DeltaTable(table).version()
    assert json.loads((out / "index.json").read_text()) == EMPTY_INDEX
    assert len(LocalDataset(str(out))) == 0
    write_deltalake(
        table, pa.table({"id": [3, 4], "name": ["c", "d"], "score": [3.0, 4.0]}, schema=SCHEMA), mode="append"
    )
    second = incremental_to_mds(table, str(out), progress=False, **options)
    assert second.samples == 2
    assert _rows(out) == [(3, "c", 3.0), (4, "d", 4.0)]
    DeltaTable(table).delete("id = 3")
    incremental_to_mds(table, str(out), progress=False, **options)
    assert _rows(out) == ([(4, "d", 4.0)] if mode == "mirror" else [(3, "c", 3.0), (4, "d", 4.0)])
    DeltaTable(table).delete()  # emptied again: a mirror holds nothing (its key map file of this run is empty)
    incremental_to_mds(table, str(out), progress=False, **options)
    assert _rows(out) == ([] if mode == "mirror" else [(3, "c", 3.0), (4, "d", 4.0)])
    write_deltalake(table, pa.table({"id": [5], "name": ["e"], "score": [5.0]}, schema=SCHEMA), mode="append")
    incremental_to_mds(table, str(out), progress=False, **options)
    assert _rows(out) == ([(5, "e", 5.0)] if mode == "mirror" else [(3, "c", 3.0), (4, "d", 4.0), (5, "e", 5.0)])


def test_a_table_without_columns_is_named_in_one_sentence(tmp_path):
    """delta-rs refuses to write a table without columns; other writers have, so its log's schema is emptied by
    hand. delta-rs's own reader ends such a table in a kernel error; this package names it."""
    from deltalake import write_deltalake

    table = tmp_path / "table"
    write_deltalake(str(table), SCHEMA.empty_table())
    commit = table / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
    for action in actions:
        if "metaData" in action:
            action["metaData"]["schemaString"] = json.dumps({"type": "struct", "fields": []})
    commit.write_text("".join(json.dumps(action) + "\n" for action in actions))
    sentence = f"Version 0 of the Delta table {table} has no columns, so it has nothing to convert."
    code, _, stderr = run_cli("convert", str(table), str(tmp_path / "out"))
    assert code == 1 and f"NoColumnsError: {sentence}" in stderr and "Traceback" not in stderr, stderr
    for mode in ("append", "mirror"):
        with pytest.raises(NoColumnsError) as refused:
            incremental_to_mds(str(table), str(tmp_path / mode), mode=mode, progress=False)
        assert str(refused.value) == sentence
    assert not (tmp_path / "out").exists() or not (tmp_path / "out" / "index.json").exists()
