"""The local notebook runner: cell parsing, widgets, magics, `dbutils.notebook.exit`, errors and the CLI."""

from __future__ import annotations

import os
import traceback
import uuid
from pathlib import Path

import pytest

NOTEBOOK = """# Databricks notebook source
# MAGIC %md
# MAGIC # Title
# MAGIC Some text.

# COMMAND ----------

# MAGIC %pip install something

# COMMAND ----------

dbutils.widgets.text("name", "default-name", "Name")
dbutils.widgets.dropdown("colour", "red", ["red", "blue"], "Colour")
seen = [dbutils.widgets.get("name"), dbutils.widgets.get("colour")]

# COMMAND ----------


# COMMAND ----------

dbutils.notebook.exit(",".join(seen))

# COMMAND ----------

never = True
"""


def write(tmp_path: Path, text: str, name: str = "nb.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_parse_notebook_splits_cells_with_their_first_lines(runner):
    cells = runner.parse_notebook(NOTEBOOK, "nb.py")
    assert [(c.number, c.line, c.magic) for c in cells] == [
        (1, 2, "md"),
        (2, 8, "pip"),
        (3, 12, None),
        (4, 21, None),
        (5, 25, None),
    ]
    assert cells[0].source == "%md\n# Title\nSome text."
    assert cells[2].source.splitlines()[0] == 'dbutils.widgets.text("name", "default-name", "Name")'


def test_parse_notebook_refuses_a_plain_script(runner):
    with pytest.raises(ValueError, match="script.py is not a Databricks source-format notebook"):
        runner.parse_notebook("print('hi')\n", "script.py")


def test_widget_defaults_and_overrides_and_exit_value(runner, tmp_path, capsys):
    path = write(tmp_path, NOTEBOOK)
    run = runner.run_notebook(path, {"colour": "blue"}, spark=object())
    assert run.exit_value == "default-name,blue"
    assert run.namespace["seen"] == ["default-name", "blue"]
    assert "never" not in run.namespace
    printed = capsys.readouterr().out
    assert "# Title\nSome text." in printed
    assert "[run_local] skipped: %pip install something" in printed


def test_dropdown_refuses_a_value_outside_its_choices(runner, tmp_path):
    path = write(tmp_path, NOTEBOOK)
    with pytest.raises(ValueError, match=r"Widget 'colour': 'green' is not one of its choices \['red', 'blue'\]"):
        runner.run_notebook(path, {"colour": "green"}, spark=object(), quiet=True)


def test_undeclared_widget_names_the_defined_ones(runner, tmp_path):
    path = write(
        tmp_path,
        '# Databricks notebook source\ndbutils.widgets.text("a", "1")\n'
        '# COMMAND ----------\ndbutils.widgets.get("b")\n',
    )
    with pytest.raises(ValueError, match=r"no input widget named 'b' is defined; defined: \['a'\]"):
        runner.run_notebook(path, spark=object(), quiet=True)


def test_values_for_undeclared_widgets_are_reported(runner, tmp_path, capsys):
    path = write(tmp_path, '# Databricks notebook source\nvalue = dbutils.widgets.getArgument("job_param", "x")\n')
    run = runner.run_notebook(path, {"job_param": "given", "typo": "1"}, spark=object(), quiet=True)
    assert run.namespace["value"] == "given"
    assert "never declared: ['job_param', 'typo']" in capsys.readouterr().err


def test_unsupported_magic_stops_the_run_naming_the_cell(runner, tmp_path):
    path = write(tmp_path, "# Databricks notebook source\nx = 1\n# COMMAND ----------\n# MAGIC %sh ls\n")
    with pytest.raises(ValueError, match=r"cell 2 \(line 4\): the %sh magic cannot run locally; supported: %md, %pip"):
        runner.run_notebook(path, spark=object(), quiet=True)


def test_a_failing_cell_points_at_its_line_in_the_notebook(runner, tmp_path):
    path = write(tmp_path, "# Databricks notebook source\nx = 1\n\n# COMMAND ----------\n\ny = 2\nraise KeyError(y)\n")
    with pytest.raises(KeyError) as raised:
        runner.run_notebook(path, spark=object(), quiet=True)
    last = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert (last.filename, last.lineno, last.line) == (path, 7, "raise KeyError(y)")


def test_parse_widget_arguments(runner):
    assert runner.parse_widget_arguments(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(ValueError, match="--widget expects name=value, got 'oops'"):
        runner.parse_widget_arguments(["oops"])


def test_cli_rejects_a_malformed_widget(runner, capsys):
    with pytest.raises(SystemExit) as raised:
        runner.main(["nb.py", "--widget", "novalue"])
    assert raised.value.code == 2
    assert "--widget expects name=value" in capsys.readouterr().err


def test_local_executors_get_the_drivers_credentials_only_during_the_run(runner, spark, monkeypatch):
    import pyarrow as pa

    def probe(batches):
        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"host": os.environ.get("DATABRICKS_HOST", "unset")}])

    def executor_host() -> str:
        return spark.range(1, numPartitions=1).mapInArrow(probe, "host string").collect()[0]["host"]

    forwarded = f"http://127.0.0.1:9/{uuid.uuid4().hex}"
    monkeypatch.setenv("DATABRICKS_HOST", forwarded)
    with runner.compute_mode(spark, "local"):
        assert executor_host() == forwarded
    assert executor_host() != forwarded
    assert "DATABRICKS_HOST" not in spark.sparkContext.environment
