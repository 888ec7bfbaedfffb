"""A reader's "gone" is typed where it enters, never recognised by an exception's text.

delta-rs's reader: a data file that cannot be opened (`FileNotFoundError`, whatever its message) is named by the
version that added or removed it, which the per-file reader knows; another error with the same words passes as
itself. Spark's reader: the error class (``getCondition``/``getErrorClass``) decides, not the message.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.incremental import IncrementalHistoryError, incremental_to_mds
from streaming.storage.table_files import NoLinkFiles

REPO = Path(__file__).resolve().parents[2]


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "text": [f"row {i}" for i in ids]})


def _table_whose_first_file_the_next_window_removes(tmp_path: Path) -> tuple[str, str, str]:
    """A table the dataset holds at version 1, then overwritten at version 2 (removing the files of 0 and 1)."""
    from deltalake import DeltaTable, write_deltalake

    table, out = str(tmp_path / "table"), str(tmp_path / "out")
    write_deltalake(table, _rows(range(0, 5)))
    first = Path(DeltaTable(table).file_uris()[0]).name
    write_deltalake(table, _rows(range(5, 10)), mode="append")
    incremental_to_mds(table, out, progress=False)
    write_deltalake(table, _rows(range(20, 25)), mode="overwrite")
    return table, out, first


def _failing(monkeypatch: pytest.MonkeyPatch, name: str, error: Exception) -> None:
    plain = NoLinkFiles.open_input_file

    def open_input_file(self, path):
        if path.strip("/") == name:
            raise error
        return plain(self, path)

    monkeypatch.setattr(NoLinkFiles, "open_input_file", open_input_file)


@pytest.mark.parametrize("message", ["", "gone", "Datei fehlt", "[ERRNO 2] no such file"])
def test_a_missing_data_file_names_its_version_whatever_its_message(tmp_path, monkeypatch, message):
    table, out, first = _table_whose_first_file_the_next_window_removes(tmp_path)
    _failing(monkeypatch, first, FileNotFoundError(message))
    with pytest.raises(IncrementalHistoryError, match=r"resync=True") as raised:
        incremental_to_mds(table, out, progress=False, change_data_feed=False)
    assert raised.value.version == 2  # the overwrite removed the file


def test_an_error_that_only_says_not_found_is_not_taken_for_missing_history(tmp_path, monkeypatch):
    """The words the job used to search for ("not found", "No such file", "does not exist") decide nothing."""
    table, out, first = _table_whose_first_file_the_next_window_removes(tmp_path)
    error = PermissionError("No such file: FileNotFound, not found, does not exist, DELTA_FILE_NOT_FOUND")
    _failing(monkeypatch, first, error)
    with pytest.raises(PermissionError) as raised:
        incremental_to_mds(table, out, progress=False, change_data_feed=False)
    assert raised.value is error


def test_spark_s_gone_is_read_from_its_error_class_not_its_words():
    from pyspark.errors import AnalysisException

    from streaming.spark.table_changes import spark_says_gone

    reworded = AnalysisException(message="reworded", errorClass="DELTA_VERSION_NOT_FOUND", messageParameters={})
    assert spark_says_gone(reworded)
    assert spark_says_gone(
        AnalysisException(message="", errorClass="FAILED_READ_FILE.FILE_NOT_EXIST", messageParameters={})
    )
    words = "Cannot time travel Delta table to version 3: not found, does not exist, DELTA_FILE_NOT_FOUND"
    assert not spark_says_gone(AnalysisException(message=words))
    assert not spark_says_gone(FileNotFoundError(words))  # not a Spark error at all


def test_nothing_in_the_job_or_the_delta_package_compares_an_exception_s_text():
    """No ``... in str(err)`` (directly, or through a name bound to ``str(err)``), where ``err`` is an exception (an
    ``except`` clause's name or a parameter typed as one), decides anything in `streaming.incremental` or
    `streaming.delta`."""
    found = []
    for package in ("incremental", "delta"):
        for path in sorted((REPO / "streaming" / package).glob("*.py")):
            tree = ast.parse(path.read_text())
            errors = {node.name for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler) and node.name}
            errors |= {
                node.arg
                for node in ast.walk(tree)
                if isinstance(node, ast.arg) and "Exception" in ast.unparse(node.annotation or ast.Constant(""))
            }
            texts = {
                target.id
                for node in ast.walk(tree)
                if isinstance(node, ast.Assign) and _text_of(node.value, errors)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                    sides = [node.left, *node.comparators]
                    if any(
                        _text_of(side, errors) or (isinstance(side, ast.Name) and side.id in texts) for side in sides
                    ):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found


def _text_of(node: ast.AST, errors: set[str]) -> bool:
    """Whether ``node`` is ``str(e)`` of an exception ``e``."""
    return (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "str"
        and any(isinstance(arg, ast.Name) and arg.id in errors for arg in node.args)
    )


def test_a_spark_job_whose_input_file_is_gone_is_read_as_gone_by_its_causes_types(spark, tmp_path):
    """A job's failure reaches Python unconverted (a ``Py4JJavaError``): its Java causes' types say the file is gone,
    whatever their messages; an error of another kind is not taken for it."""
    from streaming.spark.table_changes import spark_says_gone

    folder = tmp_path / "rows"
    spark.range(10).repartition(2).write.parquet(str(folder))
    frame = spark.read.parquet(str(folder))
    next(folder.glob("*.parquet")).unlink()  # as VACUUM removes a file a version still names
    with pytest.raises(Exception) as failed:
        frame.count()
    assert spark_says_gone(failed.value), type(failed.value)
    with pytest.raises(Exception) as other:
        spark.sql("SELECT raise_error('file not found: does not exist')").collect()
    assert not spark_says_gone(other.value), type(other.value)
