"""Every Python example of the README, CONTRIBUTING.md and the documentation site runs as written.

Each page is one test: its ``python`` blocks run in order in one namespace, as a reader would run them one after
another, so a block may use what an earlier block of the same page wrote or defined. Remote URLs and machine paths
in a block (``s3://…``, ``/Volumes/…``, ``/local_disk/…``, ``/tmp/…``) keep their shape below a folder of the
test's ``tmp_path`` (``s3://bucket/ds`` becomes ``<tmp>/s3/bucket/ds``), so the same URL is the same folder in
every block of a page and a URL below another stays below it.

A block that takes something as given (a Spark DataFrame ``df``) gets it from its ``PRELUDES`` entry; a block
that cannot run on a plain machine is listed in ``NOT_RUNNABLE`` with the reason. A block in neither list simply
runs, and a listed block that no page has any more fails the lists' check, so nothing is skipped silently. A block
whose paragraph above says it runs in "a new process" runs in one: a fresh interpreter in the same folder, with
none of the earlier blocks' names (so it must import and define all it uses, as the page promises).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming.format.mds import encodings as mds
from tests.docs.pages import REPO, blocks, first_line, pages, text

# Blocks identified by their page and first line.
NOT_RUNNABLE = {
    (
        "docs/spark.md",
        "%pip install /Volumes/main/default/mds_demo/mds_streaming-0.2.0-py3-none-any.whl",
    ): "an IPython/Databricks magic, not Python",
    ("docs/spark.md", "dbutils.library.restartPython()"): "`dbutils` exists only in a Databricks notebook",
    (
        "docs/table-to-training.md",
        "%pip install /Volumes/main/default/mds_demo/mds_streaming-0.2.0-py3-none-any.whl",
    ): "an IPython/Databricks magic, not Python",
}

_PLACES = re.compile(r"\b([a-z][a-z0-9+-]*)://|(/Volumes/|/local_disk/|/tmp/)")


def _spark_prelude(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A SparkSession, the DataFrame ``df`` and the table ``cat.sch.table`` the Spark example converts."""
    session = request.getfixturevalue("docs_spark")
    df = session.range(200).selectExpr("id", "CAST(id AS STRING) AS text", "array(id, id * 2) AS pair")
    df.write.mode("overwrite").saveAsTable("docs_table")
    return {"df": df, "spark": session}


def _spark_session_prelude(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The suite's SparkSession, active, so that the page's own ``getOrCreate()`` finds it."""
    return {"spark": request.getfixturevalue("docs_spark")}


def _training_table_prelude(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The table ``main.ml.events`` the training page converts: 2,000 rows of 8 float features and a 0/1 label."""
    session = request.getfixturevalue("docs_spark")
    features = ", ".join(f"CAST(sin(id * {k + 1}) AS FLOAT)" for k in range(8))
    table = session.range(2000).selectExpr("id", f"array({features}) AS features", "CAST(id % 2 AS INT) AS label")
    table.write.mode("overwrite").saveAsTable("docs_events")
    return {"spark": session}


PRELUDES: dict[tuple[str, str], Callable[[pytest.FixtureRequest], dict[str, Any]]] = {
    ("docs/spark.md", "from streaming.spark import dataframe_to_mds"): _spark_prelude,
    ("docs/table-to-training.md", "import os"): _spark_session_prelude,
    ("README.md", "from streaming.spark import dataframe_to_mds"): _training_table_prelude,
}
# Names a block uses that stand for something on the user's side, and what they stand for here.
TABLE_NAMES = {'"cat.sch.table"': '"docs_table"', '"main.ml.events"': '"docs_events"'}
NEEDS_SPARK = {"docs/spark.md", "docs/table-to-training.md", "README.md"}


def _python_pages() -> list[Any]:
    return [
        pytest.param(page, id=page, marks=[pytest.mark.spark] if page in NEEDS_SPARK else [])
        for page in pages()
        if (REPO / page).exists() and blocks(page, "python")
    ]


def test_every_listed_block_is_still_in_its_page():
    named = {
        (page, first_line(source)) for page in pages() if (REPO / page).exists() for _, source in blocks(page, "python")
    }
    assert named, "no page has a Python block: the extraction is broken"
    listed = set(NOT_RUNNABLE) | set(PRELUDES)
    assert listed <= named, f"listed here but no page has them any more: {sorted(listed - named)}"
    assert NEEDS_SPARK <= {page for page, _ in named}, "a page listed in NEEDS_SPARK has no Python block"


@pytest.fixture(scope="module")
def docs_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The suite's local SparkSession (reused when one is running, as the notebook tests do)."""
    from tests.spark.conftest import reused_session

    yield from reused_session(tmp_path_factory)


@pytest.fixture
def encoding_registry() -> Iterator[None]:
    """Blocks may register encodings (as the writing guide shows): leave the registry as it was."""
    saved, unsafe = dict(mds._encodings), set(mds._unsafe_encodings)
    yield
    mds._encodings.clear()
    mds._encodings.update(saved)
    mds._unsafe_encodings.clear()
    mds._unsafe_encodings.update(unsafe)


def _localize(source: str, root: Path) -> str:
    """``source`` with every URL and machine path moved below ``root``, keeping the rest of its path."""

    def place(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2).strip("/")
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        return f"{folder}/"

    return _PLACES.sub(place, source)


def in_a_new_process(page: str, line: int) -> bool:
    """Whether the paragraph just above the block starting at ``line`` says that it runs in a new process."""
    above = text(page).splitlines()[: line - 2]  # the lines before the block's opening fence
    paragraph: list[str] = []
    for prose in reversed(above):
        if not prose.strip():
            if paragraph:
                break
            continue
        paragraph.append(prose)
    return "a new process" in " ".join(reversed(paragraph)).lower()


def _run_in_a_new_process(code: str, cwd: Path) -> None:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(cwd)}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=environment, timeout=600
    )
    assert run.returncode == 0, f"the block that runs in a new process failed:\n{run.stderr[-4000:]}"


def test_the_resume_block_runs_in_a_new_process():
    starts = [line for line, _ in blocks("docs/table-to-training.md", "python")]
    assert [in_a_new_process("docs/table-to-training.md", line) for line in starts][-1]
    assert sum(in_a_new_process("docs/table-to-training.md", line) for line in starts) == 1


@pytest.mark.parametrize("page", _python_pages())
def test_page_examples_run(page, tmp_path, request, monkeypatch, encoding_registry, private_tempdir):
    """Each page's examples in order, in one namespace, in this test's folders (the temporary one too)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for line, source in blocks(page, "python"):
        first = first_line(source)
        if (page, first) in NOT_RUNNABLE:
            continue  # listed on purpose, with the reason; the lists' check keeps the entry honest
        prelude = PRELUDES.get((page, first))
        if prelude is not None:
            namespace.update(prelude(request))
        code = _localize(source, tmp_path / "places")
        for name, stand_in in TABLE_NAMES.items():
            code = code.replace(name, stand_in)
        if in_a_new_process(page, line):
            _run_in_a_new_process("\n" * (line - 1) + code, tmp_path)
            continue
        # Padding keeps the page's line numbers in tracebacks.
        exec(compile("\n" * (line - 1) + code, str(REPO / page), "exec"), namespace)  # noqa: S102 - the docs' own code
