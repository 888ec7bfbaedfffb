"""`convert` through Spark: an active session (or `--spark`) hands the input to `dataframe_to_mds`."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset
from tests.cli.conftest import run_cli
from tests.cli.test_convert import EXPECTED, _table
from tests.spark.conftest import local_session

pytestmark = pytest.mark.spark


def test_convert_with_an_active_session_matches_the_pyarrow_path(tmp_path):
    source = str(tmp_path / "in.parquet")
    # Spark reads neither float16, date64 nor nanosecond timestamps
    pq.write_table(
        _table(200).drop([name for name in ("half", "day") if name in EXPECTED]), source, coerce_timestamps="us"
    )
    local_session(str(tmp_path / "warehouse"))
    code, doc, err = run_cli("convert", source, str(tmp_path / "spark"), "--json", "--quiet")
    assert code == 0, err
    assert doc["engine"] == "spark" and doc["samples"] == 200
    code, arrow, err = run_cli("convert", source, str(tmp_path / "arrow"), "--json", "--engine", "pyarrow")
    assert code == 0, err
    expected = {name: encoding for name, encoding in EXPECTED.items() if name not in ("half", "day")}
    assert arrow["columns"] == expected
    assert doc["columns"] == {**expected, "label": "str"}
    by_spark = sorted((s["id"], s["text"], s["meta"]) for s in LocalDataset(str(tmp_path / "spark")))
    by_arrow = sorted((s["id"], s["text"], s["meta"]) for s in LocalDataset(str(tmp_path / "arrow")))
    assert by_spark == by_arrow
