"""Row identity (`streaming.convert.row_identity`) and the multiset difference on both engines.

A row's identity is what the dataset stores of it: these tests check it tells apart what the issue names (a
microsecond, -0.0, NaN, a decimal digit, a byte, a nested value, NULL from zero), that the identity recomputed
from stored shard bytes equals the one computed from the rows written (what ``resync`` relies on), and that the
Spark reader's difference (`spark_net_change`, identities computed on the executors) equals the Arrow one.
"""

from __future__ import annotations

import datetime
from collections import Counter
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.convert.null_plan import dataset_columns
from streaming.convert.row_identity import dataset_identities, net_change, row_identities, value_columns
from streaming.convert.source import Source
from streaming.convert.table_engine import convert_table
from streaming.format.commit_log import read_snapshot
from streaming.storage.dataset_root import DatasetRoot

UTC = datetime.timezone.utc
TYPES = {
    "ts": pa.timestamp("us", tz="UTC"),
    "value": pa.float64(),
    "amount": pa.decimal128(10, 3),
    "blob": pa.binary(),
    "nested": pa.struct([("at", pa.timestamp("us", tz="UTC")), ("tags", pa.map_(pa.string(), pa.int32()))]),
    "nums": pa.list_(pa.int32()),
    "count": pa.int32(),
}
ENCODINGS = {
    "ts": "int64",
    "value": "float64",
    "amount": "str_decimal",
    "blob": "bytes",
    "nested": "json",
    "nums": "ndarray:int32",
    "count": "int32",
}
BASE = {
    "ts": datetime.datetime(2024, 1, 1, tzinfo=UTC),
    "value": 1.0,
    "amount": Decimal("1.000"),
    "blob": b"a",
    "nested": {"at": datetime.datetime(2024, 1, 1, tzinfo=UTC), "tags": [("k", 1)]},
    "nums": [1, 2],
    "count": 0,
}


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema(list(TYPES.items())))


@pytest.mark.parametrize(
    ("column", "other"),
    [
        ("ts", datetime.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC)),
        ("value", -0.0),
        ("value", float("nan")),
        ("amount", Decimal("1.001")),
        ("blob", b"a\x00"),
        ("nested", {"at": datetime.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC), "tags": [("k", 1)]}),
        ("nested", {"at": datetime.datetime(2024, 1, 1, tzinfo=UTC), "tags": [("k", 2)]}),
        ("nums", [1, None]),
        ("nums", None),
        ("count", None),
    ],
)
def test_rows_that_differ_in_anything_the_dataset_stores_have_different_identities(column, other):
    changed = {**BASE, column: other}
    base, again, moved = row_identities(_table([BASE, dict(BASE), changed]), ENCODINGS)
    assert base == again
    assert moved != base
    if column == "value":
        zero, negative_zero = row_identities(_table([{**BASE, "value": 0.0}, {**BASE, "value": -0.0}]), ENCODINGS)
        assert zero != negative_zero
        nan, nan_again = row_identities(_table([{**BASE, "value": float("nan")}] * 2), ENCODINGS)
        assert nan == nan_again, "NaN is the same row as NaN, unlike NaN == NaN"


def test_null_is_not_the_zero_that_stands_in_for_it():
    nulls = {name: None for name in TYPES}
    zeros = {**nulls, "value": 0.0, "count": 0, "blob": b"", "nums": []}
    assert len(set(row_identities(_table([nulls, zeros]), ENCODINGS))) == 2


def test_a_column_outside_the_dataset_plays_no_part():
    table = _table([BASE, {**BASE, "count": 7}])
    chosen = {name: encoding for name, encoding in ENCODINGS.items() if name != "count"}
    first, second = row_identities(table, chosen)
    assert first == second


def test_identities_from_stored_shards_equal_those_of_the_rows_written(tmp_path):
    """What resync compares: the dataset's own stored rows, masked NULLs and widened columns included."""
    rows = [
        BASE,
        {**BASE, "value": float("nan"), "count": None, "ts": None},
        {**BASE, "nested": None, "blob": None, "amount": None, "nums": None},
    ]
    out = str(tmp_path / "ds")
    source = Source("dataframe")
    convert_table(_table(rows), out, source=source, nulls="nullable", compression="zstd", mode="error")
    later = [{**BASE, "nums": [3, None]}, {**BASE, "count": 5}]  # NULL elements: these shards store nums as json
    existing = read_snapshot(DatasetRoot(out)).shards
    with pytest.warns(UserWarning, match="arrays with NULL elements"):
        convert_table(_table(later), out, source=source, nulls="nullable", mode="append", join_shards=existing)
    state = read_snapshot(DatasetRoot(out))
    encodings = {
        name: encoding
        for name, encoding in zip(state.shards[0]["column_names"], state.shards[0]["column_encodings"])
        if name in TYPES
    }
    assert {shard["column_encodings"][shard["column_names"].index("nums")] for shard in state.shards} == {
        "ndarray:int32",
        "json",
    }
    stored = dataset_identities(DatasetRoot(out), state.shards, encodings)
    assert stored == Counter(row_identities(_table(rows + later), encodings))
    assert value_columns(dict(zip(state.shards[0]["column_names"], state.shards[0]["column_encodings"]))) == encodings
    # What resync identifies rows by: the dataset's columns at their widest (nums: json, as the later shards store
    # it), under which the earlier ndarray shards' arrays and masked NULLs are their JSON text (`[1, 2]`, `null`).
    widest = value_columns(dataset_columns(state.shards))
    assert widest["nums"] == "json"
    stored = dataset_identities(DatasetRoot(out), state.shards, widest)
    assert stored == Counter(row_identities(_table(rows + later), widest))


def test_net_change_is_a_multiset_difference():
    a, b, c = BASE, {**BASE, "count": 1}, {**BASE, "count": 2}
    added, removed = net_change(_table([a, a, b, c]), _table([a, c, c]), ENCODINGS)
    assert Counter(row_identities(added, ENCODINGS)) == Counter(row_identities(_table([a, b]), ENCODINGS))
    assert removed == 1


small_rows = st.lists(
    st.builds(lambda v, n: {**BASE, "count": v, "nums": n}, st.integers(0, 3), st.sampled_from([[1], None, [1, None]])),
    max_size=8,
)


@settings(max_examples=8, deadline=None, database=None)
@given(small_rows, small_rows)
def test_the_spark_difference_equals_the_arrow_one(spark, plus_rows, minus_rows):
    from streaming.spark.table_changes import spark_net_change
    from streaming.spark.table_input import frame_from_arrow

    plus, minus = _table(plus_rows), _table(minus_rows)
    expected, expected_removed = net_change(plus, minus, ENCODINGS)
    frame, removed = spark_net_change(frame_from_arrow(spark, plus), frame_from_arrow(spark, minus), ENCODINGS)
    got = pa.Table.from_pylist([row.asDict(recursive=True) for row in frame.collect()], schema=plus.schema)
    assert removed == expected_removed
    assert Counter(row_identities(got, ENCODINGS)) == Counter(row_identities(expected, ENCODINGS))


def test_the_spark_reader_reads_the_rows_of_chosen_files_only(spark, tmp_path):
    from streaming.spark.table_changes import rows_in_files

    for part in range(3):
        pq.write_table(pa.table({"id": [part * 10, part * 10 + 1]}), tmp_path / f"part-{part}.parquet")
    frame = spark.read.parquet(str(tmp_path))
    files = sorted(frame.inputFiles())
    chosen = rows_in_files(frame, files[1:2], ["id"])
    assert sorted(row["id"] for row in chosen.collect()) == [10, 11]
    assert rows_in_files(frame, [], ["id"]).count() == 0


def test_the_nullable_policy_counts_no_value_nulls_in_a_spark_job(spark, tmp_path, monkeypatch):
    """Masks follow the schema: the aggregate scan a UC table name used to cost is not run."""
    from streaming.spark import convert as spark_convert
    from streaming.spark.convert import dataframe_to_mds

    calls = []
    original = spark_convert.aggregate_null_counts

    def counting(frame, values, elements):
        calls.append((list(values), list(elements)))
        return original(frame, values, elements)

    monkeypatch.setattr(spark_convert, "aggregate_null_counts", counting)
    frame = spark.createDataFrame([(1, "a"), (None, None)], "id INT, name STRING")
    result = dataframe_to_mds(frame, str(tmp_path / "ds"), nulls="nullable", progress=False)
    assert calls == []
    assert result.nulls == {"id": "id__is_null", "name": "name__is_null"}
