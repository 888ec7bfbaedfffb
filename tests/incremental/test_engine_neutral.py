"""The job without Spark: `streaming.incremental.incremental_to_mds` and `mds-streaming incremental` on a Delta path.

The engine-neutral entry must write what Spark's face of the job writes when that face reads the same path with
delta-rs, must never import pyspark (the command line on a machine without it), and must say what to do with a
table name, which only Spark reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.incremental import incremental_to_mds as without_spark
from streaming.spark import incremental_to_mds as with_spark
from tests.cli.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "text": [f"row {i}" for i in ids]})


def _result(result) -> dict:
    document = result.to_json()
    document.pop("path")
    return document


def test_both_faces_of_the_job_agree_on_a_delta_path(tmp_path):
    """Runs of the engine-neutral entry and of Spark's face (reading the path with delta-rs, no session) give the
    same results, appending and mirroring."""
    from deltalake import DeltaTable, write_deltalake

    table = str(tmp_path / "table")
    write_deltalake(table, _rows(range(20)), configuration={"delta.enableChangeDataFeed": "true"})
    outs = {name: {mode: str(tmp_path / f"{name}-{mode}") for mode in ("append", "mirror")} for name in ("a", "b")}
    faces = {"a": without_spark, "b": with_spark}
    for step in range(3):
        results = {
            name: [
                _result(face(table, outs[name][mode], mode=mode, key=["id"] if mode == "mirror" else None))
                for mode in ("append", "mirror")
            ]
            for name, face in faces.items()
        }
        assert results["a"] == results["b"], f"step {step}"
        DeltaTable(table).delete(f"id = {step}")
        write_deltalake(table, _rows(range(100 + step, 101 + step)), mode="append")
    assert results["a"][1]["removed"] == 1 and results["a"][0]["unapplied_changes"] == 1


def test_a_table_name_is_refused_naming_spark_s_face(tmp_path):
    with pytest.raises(
        ValueError, match=r"'main\.sales\.orders' is a table name.*streaming\.spark\.incremental_to_mds"
    ):
        without_spark("main.sales.orders", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_command_line_on_a_delta_path_never_imports_pyspark(tmp_path):
    """`mds-streaming incremental` on a Delta path, in a fresh process: the run completes and pyspark stays out."""
    from deltalake import write_deltalake

    table, out = str(tmp_path / "table"), str(tmp_path / "out")
    write_deltalake(table, _rows(range(5)))
    script = (
        "import sys\n"
        "from streaming.cli import main\n"
        "code = main(['incremental', sys.argv[1], sys.argv[2], '--json'])\n"
        "assert code == 0, code\n"
        "assert 'pyspark' not in sys.modules, 'pyspark was imported'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script, table, out], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["samples"] == 5
    code, document, _ = run_cli("incremental", table, out, "--json")
    assert (code, document["method"]) == (0, "up_to_date")
