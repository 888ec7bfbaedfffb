"""The README's Python examples run as written, so they cannot rot.

Every fenced ``python`` block of README.md is a test case. Remote URLs and machine paths in a block (``s3://…``,
``/Volumes/…``, ``/local_disk/…``, ``/tmp/…``) are rewritten to folders of the test's ``tmp_path``, the same URL
to the same folder across the blocks of one test; a block that reads data finds it there, written by its
``PRELUDES`` entry (which also provides names a block takes as given, like a DataFrame ``df``). Blocks that
cannot run on a plain machine are listed in ``NOT_RUNNABLE`` with the reason; a block in neither list simply
runs, and any block the README no longer has fails the lists' check, so nothing is skipped silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streaming import MDSWriter
from streaming.format.mds import encodings as mds

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_PLACES = re.compile(r"(?:\b[a-z][a-z0-9+-]*://|/Volumes/|/local_disk/|/tmp/)[^\s\"')]*")


def readme_blocks() -> list[tuple[int, str]]:
    """``(first line number, source)`` of every Python block of the README."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, match.start(1)) + 1, match.group(1)) for match in _BLOCK.finditer(text)]


def _first_line(source: str) -> str:
    return source.strip().splitlines()[0]


# Blocks identified by their first line.
NOT_RUNNABLE = {
    "%pip install mds-streaming": "an IPython/Databricks magic, not Python",
    "dbutils.library.restartPython()": "`dbutils` exists only in a Databricks notebook",
}


def _write_tokens_dataset(out: str) -> None:
    """Fixed-length samples, so that a DataLoader's default collation batches them."""
    with MDSWriter(out=out, columns={"tokens": "ndarray:int32", "text": "str"}, compression="zstd") as writer:
        for i in range(256):
            writer.write({"tokens": np.arange(i, i + 8, dtype=np.int32), "text": f"sample {i}"})


def _spark_prelude(place: Callable[[str], str], request: pytest.FixtureRequest) -> dict[str, Any]:
    """A SparkSession, the DataFrame ``df`` and the table ``cat.sch.table`` the Spark example converts."""
    session = request.getfixturevalue("readme_spark")
    df = session.range(200).selectExpr("id", "CAST(id AS STRING) AS text", "array(id, id * 2) AS pair")
    df.write.mode("overwrite").saveAsTable("readme_table")
    return {"df": df, "spark": session}


def _torch_prelude(place: Callable[[str], str], request: pytest.FixtureRequest) -> dict[str, Any]:
    """The dataset at ``s3://bucket/ds`` that the PyTorch example streams."""
    _write_tokens_dataset(place("s3://bucket/ds"))
    return {}


PRELUDES: dict[str, Callable[[Callable[[str], str], pytest.FixtureRequest], dict[str, Any]]] = {
    "from streaming.spark import dataframe_to_mds": _spark_prelude,
    "from streaming import StreamingDataset, StreamingDataLoader": _torch_prelude,
}
# Names a block uses that stand for something on the user's side, and what they stand for here.
TABLE_NAMES = {'"cat.sch.table"': '"readme_table"'}
NEEDS_SPARK = {"from streaming.spark import dataframe_to_mds"}


def _cases() -> list[Any]:
    return [
        pytest.param(
            line,
            source,
            id=f"README.md:{line}",
            marks=[pytest.mark.spark] if _first_line(source) in NEEDS_SPARK else [],
        )
        for line, source in readme_blocks()
    ]


def test_every_listed_block_is_still_in_the_readme():
    firsts = {_first_line(source) for _, source in readme_blocks()}
    assert firsts, "README.md has no Python block: the extraction is broken"
    listed = set(NOT_RUNNABLE) | set(PRELUDES) | NEEDS_SPARK
    assert listed <= firsts, f"listed here but not in README.md any more: {sorted(listed - firsts)}"


@pytest.fixture(scope="module")
def readme_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The suite's local SparkSession (reused when one is running, as the notebook tests do)."""
    from pyspark.sql import SparkSession

    from tests.spark.conftest import local_session

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    session = local_session(str(tmp_path_factory.mktemp("warehouse")))
    yield session
    session.stop()


@pytest.fixture
def encoding_registry() -> Iterator[None]:
    """Blocks may register encodings (as the README shows): leave the registry as it was."""
    saved, unsafe = dict(mds._encodings), set(mds._unsafe_encodings)
    yield
    mds._encodings.clear()
    mds._encodings.update(saved)
    mds._unsafe_encodings.clear()
    mds._unsafe_encodings.update(unsafe)


@pytest.mark.parametrize("line, source", _cases())
def test_readme_block_runs(line, source, tmp_path, request, encoding_registry):
    first = _first_line(source)
    if first in NOT_RUNNABLE:
        # Listed on purpose; the reason is in NOT_RUNNABLE and this block's text is checked to still exist.
        assert first in source
        return
    places: dict[str, str] = {}

    def place(url: str) -> str:
        """The local folder standing in for ``url`` (made on first use)."""
        if url not in places:
            folder = tmp_path / "places" / re.sub(r"[^A-Za-z0-9._-]+", "_", url).strip("_")
            folder.parent.mkdir(parents=True, exist_ok=True)
            places[url] = str(folder)
        return places[url]

    namespace: dict[str, Any] = {"__name__": "__readme__"}
    prelude = PRELUDES.get(first)
    if prelude is not None:
        namespace.update(prelude(place, request))
    code = _PLACES.sub(lambda match: place(match.group(0)), source)
    for name, stand_in in TABLE_NAMES.items():
        code = code.replace(name, stand_in)
    # Padding keeps the README's line numbers in tracebacks.
    exec(compile("\n" * (line - 1) + code, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
