"""`python -m streaming convert` (pyarrow engine) stores NULLs as `dataframe_to_mds` does: with NULL masks.

The table of `tests/spark/test_nulls.py` (NULLs in every column type) as a Parquet file (NULL counts from the
footers, arrays read once) and as a Delta table (counts from the Delta statistics, the rest read once) reads
back with each value as its NULL-free encoding gives it and each NULL as None, in our reader and in
streaming-community 0.14.2; ``--nulls error`` keeps the strict behaviour, an explicit encoding wins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset
from tests.cli.conftest import run_cli
from tests.cli.test_convert import REPO
from tests.spark.test_nulls import COLUMNS, _assert_reads_back, _reference_reads, _table

MASKED = {name for name, (_, values) in COLUMNS.items() if None in values} - {"floats", "point", "tags"}


def _convert(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run(
        [sys.executable, "-m", "streaming", "convert", *args, "--json", "--quiet", "--engine", "pyarrow"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.reference
@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_nulls_in_every_type_convert_with_default_columns(kind, tmp_path):
    source = str(tmp_path / "in.parquet")
    if kind == "parquet":
        pq.write_table(_table(), source, row_group_size=2)
    else:
        from deltalake import write_deltalake

        source = str(tmp_path / "table")
        write_deltalake(source, _table().slice(0, 2))
        write_deltalake(source, _table().slice(2), mode="append")
    out = str(tmp_path / "out")
    done = _convert(source, out)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["samples"] == 4 and set(summary["nulls"]["masks"]) == MASKED
    assert summary["nulls"]["as_json"] == ["floats"] and summary["columns"]["floats"] == "json"
    assert summary["columns"]["clean"] == "int32" and "clean__is_null" not in summary["columns"]
    assert summary["columns"]["i32__is_null"] == "uint8" and summary["columns"]["price"] == "str_decimal"
    counted_by = "aggregate" if kind == "parquet" else "delta statistics+aggregate"
    assert summary["nulls"]["counted_by"] == counted_by
    assert "convert: column(s) 'i8' (2 NULLs, mask 'i8__is_null')" in done.stderr
    _assert_reads_back(out)

    reference = _reference_reads(out)
    assert [sample["i32__is_null"] for sample in reference] == [1, 0, 0, 1]
    assert [sample["blob"] for sample in reference] == ["0001", "", "", ""]
    assert [sample["price"] for sample in reference] == ["123.45", "0.00", "-0.01", "0.00"]
    assert [sample["floats"] for sample in reference] == [[0.5], None, [1.0, None], None]


def test_nulls_error_explicit_encodings_and_appends(tmp_path):
    source = str(tmp_path / "in.parquet")
    pq.write_table(_table().select(["id", "i32", "clean"]), source)
    code, _, err = run_cli(
        "convert", "--engine", "pyarrow", source, str(tmp_path / "strict"), "--nulls", "error", "--quiet"
    )
    assert code != 0 and "'i32'" in err and "holds a NULL" in err
    code, _, err = run_cli(
        "convert", "--engine", "pyarrow", source, str(tmp_path / "explicit"), "--columns", "id,i32:int64", "--quiet"
    )
    assert code != 0 and "'i32' (encoding 'int64') holds a NULL" in err
    assert not os.path.exists(tmp_path / "explicit" / "index.json")
    # Masks follow the dataset appended to: NULL-free rows keep the mask column.
    with pytest.warns(UserWarning, match="'i32' \\(2 NULLs"):
        assert run_cli("convert", "--engine", "pyarrow", source, str(tmp_path / "grow"), "--quiet")[0] == 0
    clean = str(tmp_path / "clean.parquet")
    pq.write_table(_table().select(["id", "i32", "clean"]).slice(1, 2), clean)
    code, summary, err = run_cli(
        "convert", "--engine", "pyarrow", clean, str(tmp_path / "grow"), "--mode", "append", "--json", "--quiet"
    )
    assert code == 0, err
    assert summary["nulls"]["masks"] == {"i32": "i32__is_null"} and summary["columns"]["i32__is_null"] == "uint8"
    # A NULL in a column the dataset stores without a mask is refused, naming it, and nothing is added.
    late = str(tmp_path / "late.parquet")
    pq.write_table(pa.table({"id": [9], "i32": pa.array([1], pa.int32()), "clean": pa.array([None], pa.int32())}), late)
    index = (tmp_path / "grow" / "index.json").read_bytes()
    code, _, err = run_cli(
        "convert", "--engine", "pyarrow", late, str(tmp_path / "grow"), "--mode", "append", "--quiet"
    )
    assert code != 0 and "column(s) 'clean' (1 NULLs)" in err, err[-2000:]
    assert (tmp_path / "grow" / "index.json").read_bytes() == index
    samples = sorted(LocalDataset(str(tmp_path / "grow")), key=lambda sample: int(sample["id"]))
    assert [sample["i32"] for sample in samples] == [None, 1, 1, -2, -2, None]
