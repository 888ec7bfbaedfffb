"""dataframe_to_mds on a Spark whose Python workers are another interpreter, one without pyarrow (`core_python`):
the driver answers with one sentence naming the workers' Python and the two fixes, not a Java stack trace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DRIVER = """
import sys
from pyspark.sql import SparkSession
spark = (
    SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate()
)
from streaming.spark import dataframe_to_mds
dataframe_to_mds(spark.range(10), sys.argv[1], progress=False)
"""


@pytest.mark.spark
def test_workers_without_the_package_are_named_with_the_fix(core_python, tmp_path):
    environment = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": str(core_python)}
    environment["SPARK_LOCAL_IP"] = "127.0.0.1"
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, str(out)], capture_output=True, text=True, env=environment, timeout=300
    )
    assert run.returncode == 1
    assert run.stderr.rstrip().splitlines()[-1] == (
        "streaming.spark.worker_python.WorkerImportError: Spark's Python workers cannot import 'pyarrow', which "
        f"dataframe_to_mds's tasks need: they run PYSPARK_PYTHON={core_python}, not this Python ({sys.executable}); "
        "install mds-streaming with its spark extra there (from the checkout or wheel this Python has it from; on "
        f"Databricks, the notebook's %pip install reaches the workers too) or start Spark with "
        f"PYSPARK_PYTHON={sys.executable}."
    )
    # Spark's own log still shows the executor's error; the driver's traceback holds none of pyspark's frames.
    assert "pyspark/errors/exceptions/captured.py" not in run.stderr
    assert not (out / "index.json").exists()
