"""Inputs other than a DataFrame: a Delta table by path (read with deltalake here) and a table by name."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from streaming.spark import dataframe_to_mds
from tests.spark.helpers import assert_no_orphans, read_samples


@pytest.fixture(scope="module")
def delta_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Delta table with two versions: 0 holds ids 0..2, 1 appends ids 10 and 11."""
    from deltalake import write_deltalake

    path = str(tmp_path_factory.mktemp("delta") / "events")
    write_deltalake(path, pa.table({"id": pa.array([0, 1, 2], pa.int64()), "name": ["a", "b", "c"]}))
    write_deltalake(path, pa.table({"id": pa.array([10, 11], pa.int64()), "name": ["k", "l"]}), mode="append")
    return path


def test_delta_path_records_the_version_converted(session, delta_path, tmp_path):
    latest = dataframe_to_mds(delta_path, str(tmp_path / "latest"), spark=session, progress=False)
    assert (latest.table_version, latest.samples) == (1, 5)
    assert_no_orphans(str(tmp_path / "latest"))
    assert sorted(int(s["id"]) for s in read_samples(str(tmp_path / "latest"))) == [0, 1, 2, 10, 11]
    with open(os.path.join(tmp_path / "latest", "mds_conversion.json"), encoding="utf-8") as file:
        source = json.load(file)["latest"]["source"]
    assert source == {"kind": "delta", "name": delta_path, "version": 1, "reader": "deltalake"}

    pinned = dataframe_to_mds(delta_path, str(tmp_path / "v0"), spark=session, version=0, progress=False)
    assert (pinned.table_version, pinned.samples) == (0, 3)
    assert sorted(s["name"] for s in read_samples(str(tmp_path / "v0"))) == ["a", "b", "c"]


def test_a_delta_path_with_deletion_vectors_leaves_out_the_rows_they_mark(session, tmp_path):
    from tests.incremental.row_tracked_table import TrackedTable

    table = TrackedTable(tmp_path / "t", [{"id": i, "name": f"n{i}"} for i in range(8)], deletion_vectors=True)
    table.mark_deleted({1, 6}, in_file=True)
    result = dataframe_to_mds(str(table.path), str(tmp_path / "out"), spark=session, progress=False)
    assert (result.table_version, result.samples) == (1, 6)
    assert sorted(int(s["id"]) for s in read_samples(str(tmp_path / "out"))) == [0, 2, 3, 4, 5, 7]


def test_table_by_name(session, request, tmp_path):
    name = f"mds_people_{request.node.callspec.id}"
    session.sql(f"DROP TABLE IF EXISTS {name}")
    session.range(0, 4, 1, 2).selectExpr("id", "CAST(id * 2 AS INT) AS twice").write.saveAsTable(name)
    result = dataframe_to_mds(name, str(tmp_path / "out"), spark=session, columns={"twice": "int32"}, progress=False)
    assert (result.samples, result.table_version) == (4, None)
    assert sorted(int(s["twice"]) for s in read_samples(str(tmp_path / "out"))) == [0, 2, 4, 6]
    session.sql(f"DROP TABLE {name}")
