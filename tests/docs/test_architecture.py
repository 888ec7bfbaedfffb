"""The package table of docs/architecture.md names every module of the packages it describes, in the right row.

Each package of `PACKAGES` has one row, ``| `streaming/<package>/` | owns | does not know |``. The rule: every
module file below the package (any depth, ``__init__.py`` aside) is named in that row, in an inline code span,
by its path relative to the package folder (``local_tree.py``, ``json/reader.py``, ``coordination/root.py``),
and every ``*.py`` path the row names is a module of that package. `tests.docs.test_paths` checks the page's
other citations (a path relative to a package only has to exist somewhere); this checks the rows exactly, so a
module added, moved or renamed fails here until its row says what it does.
"""

from __future__ import annotations

import re

import pytest

from tests.docs.pages import REPO, text

PAGE = "docs/architecture.md"
PACKAGES = ("storage", "format", "dataset", "delta", "convert", "incremental", "spark", "cli", "compat")
_ROW = re.compile(r"^\| `streaming/(\w+)/` \|(.*)$", re.MULTILINE)
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_MODULE_PATH = re.compile(r"[\w/]+\.py\b")


def _rows() -> dict[str, list[str]]:
    """Package → the rows of the table that describe it (one, unless the page is wrong)."""
    rows: dict[str, list[str]] = {}
    for package, cells in _ROW.findall(text(PAGE)):
        rows.setdefault(package, []).append(cells)
    return rows


def _named(cells: str) -> set[str]:
    """The ``*.py`` paths named in inline code spans of a row."""
    return {path for span in _SPAN.findall(cells) for path in _MODULE_PATH.findall(span)}


def _modules(package: str) -> set[str]:
    folder = REPO / "streaming" / package
    return {
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }


def test_each_package_has_one_row():
    rows = _rows()
    counts = {package: len(rows.get(package, [])) for package in PACKAGES}
    assert all(count == 1 for count in counts.values()), f"{PAGE}: rows per package, each should be 1: {counts}"


@pytest.mark.parametrize("package", PACKAGES)
def test_row_names_every_module(package):
    (cells,) = _rows()[package]
    missing = sorted(_modules(package) - _named(cells))
    assert not missing, (
        f"{PAGE}'s row for streaming/{package}/ does not name these modules (say what each does there, by its "
        f"path relative to streaming/{package}/): {missing}"
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_row_names_only_modules_of_its_package(package):
    (cells,) = _rows()[package]
    unknown = sorted(_named(cells) - _modules(package))
    assert not unknown, f"{PAGE}'s row for streaming/{package}/ names modules that are not in it: {unknown}"


def test_rule_reads_nested_paths():
    assert _named("the readers (`mds/reader.py`, `json/reader.py`) and `vacuum(out)` (`vacuum.py`)") == {
        "mds/reader.py",
        "json/reader.py",
        "vacuum.py",
    }
