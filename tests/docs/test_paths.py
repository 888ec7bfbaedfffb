"""What the documentation cites exists: files and folders, modules and their names, Makefile targets, commands.

Read from inline code, fenced shell blocks and Markdown links of every page (`tests.docs.pages`):

* a path under a top-level folder of the repository (``streaming/format/writer.py``, ``tests/faults/``,
  ``benchmarks/run.sh``, ``docs/…``, ``.ci/run``) or a top-level file must exist; a ``*.py`` or ``*.sh`` name given
  relative to its package (``format/writer.py``, ``lockfile.py``) must end the path of some file of the repository;
* a dotted name under ``streaming`` (``streaming.spark.schema``, ``streaming.base.util.merge_index``) must import
  and have each attribute named;
* ``make TARGET`` must name a target of the Makefile, and ``mds-streaming COMMAND`` a command of the command line;
* a relative link of the README or CONTRIBUTING.md must reach a file (mkdocs checks the site's own links).

So a module moved or renamed fails here until every page says where it went.
"""

from __future__ import annotations

import importlib
import os
import re
from functools import cache
from pathlib import Path

import pytest

from tests.docs.pages import REPO, blocks, pages, text

#: Folders made by `make`, pytest or the tools, never committed: a page may name them.
GENERATED = (
    ".venv",
    ".venv-ref",
    ".venv-spark35",
    ".ci/upstream-suite",
    ".ci/node",
    ".ci/databricks-sdk-",
    ".ci/clients",
    ".ci/core-venv",
    ".ci/delta-jars",
    ".ci/m2",
    "dist",
    "site",
    ".bench",
    ".hypothesis",
)
#: Where files live, for names given relative to their package.
SOURCE_ROOTS = ("streaming", "tests", "benchmarks", "notebooks", "docs", ".ci")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PATH = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./-]*")
_MODULE = re.compile(r"\bstreaming(?:\.[A-Za-z_]\w*)+")
_MAKE = re.compile(r"\bmake[ \t]+([a-z][\w.-]*)(?![\w=])")
_COMMAND = re.compile(r"\bmds-streaming[ \t]+([a-z][\w-]*)")
_PLACEHOLDER = re.compile(r"[<>*{}…$]")


def _code(page: str) -> list[str]:
    """The inline code spans and shell blocks of ``page``: where paths, modules and commands are named."""
    content = text(page)
    spans = _INLINE.findall(re.sub(r"^```.*?^```", "", content, flags=re.MULTILINE | re.DOTALL))
    shell = [source for language in ("bash", "sh", "text", "") for _, source in blocks(page, language)]
    # A shell comment is prose ("the mds-streaming command's options"), not a command.
    return spans + [re.sub(r"(^|\s)#.*", "", source) for source in shell]


def _existing_pages() -> list[str]:
    return [page for page in pages() if (REPO / page).exists()]


@cache
def _repository_files() -> tuple[str, ...]:
    found = []
    for root in SOURCE_ROOTS:
        for folder, subfolders, files in os.walk(REPO / root):
            relative = Path(folder).relative_to(REPO).as_posix()
            # Pruned, not filtered: .ci's generated folders hold node_modules and whole venvs (seconds to walk).
            subfolders[:] = [
                name for name in subfolders if name != "__pycache__" and not f"{relative}/{name}".startswith(GENERATED)
            ]
            found.append(relative)
            found.extend(f"{relative}/{name}" for name in files)
    return tuple(found)


def _top_level() -> set[str]:
    return {path.name for path in REPO.iterdir() if not path.name.startswith(GENERATED)}


def _cited_paths(snippet: str) -> list[str]:
    cited = []
    top = _top_level()
    for word in re.split(r"[\s`'\"(),;=\[\]]+", snippet):
        if _PLACEHOLDER.search(word) or "://" in word or word.startswith(("/", "~", "-")):
            continue
        match = _PATH.match(word)
        if match is None:
            continue
        path = match.group(0).split("::")[0].rstrip(".:/")
        first = path.split("/")[0]
        if ("/" in path and first in top) or path in top or path.endswith((".py", ".sh")):
            cited.append(path)
    return cited


def _exists(path: str) -> bool:
    if path.startswith(GENERATED) or (REPO / path).exists():
        return True
    return path.endswith((".py", ".sh")) and any(f == path or f.endswith("/" + path) for f in _repository_files())


@pytest.mark.parametrize("page", _existing_pages())
def test_cited_paths_exist(page):
    missing = sorted({path for snippet in _code(page) for path in _cited_paths(snippet) if not _exists(path)})
    assert not missing, f"{page} cites paths that do not exist: {missing}"


@pytest.mark.parametrize("page", _existing_pages())
def test_links_reach_files(page):
    folder = (REPO / page).parent
    broken = []
    for target in _LINK.findall(text(page)):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        if not (folder / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{page} links to files that do not exist: {broken}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(value, name):
                return False
            value = getattr(value, name)
        return True
    return False


@pytest.mark.parametrize("page", _existing_pages())
def test_cited_modules_and_names_exist(page):
    cited = {name for snippet in _code(page) for name in _MODULE.findall(snippet)}
    missing = sorted(name for name in cited if not _resolves(name))
    assert not missing, f"{page} cites modules or names that do not exist: {missing}"


def _make_targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w.%-]*)\s*:(?!=)", makefile, flags=re.MULTILINE))


def _missing_targets(cited: set[str]) -> set[str]:
    """The cited targets no rule of the Makefile makes, a pattern rule (``test-python%``) included."""
    rules = _make_targets()
    patterns = [re.compile(re.escape(rule).replace("%", ".+")) for rule in rules if "%" in rule]
    return {target for target in cited if target not in rules and not any(p.fullmatch(target) for p in patterns)}


def _commands() -> set[str]:
    import argparse

    from streaming.cli import build_parser

    (subcommands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return set(subcommands.choices)


@pytest.mark.parametrize("page", _existing_pages())
def test_make_targets_and_commands_exist(page):
    snippets = _code(page)
    targets = {target for snippet in snippets for target in _MAKE.findall(snippet)}
    commands = {command for snippet in snippets for command in _COMMAND.findall(snippet)}
    assert not _missing_targets(targets), f"{page} names make targets the Makefile lacks: {_missing_targets(targets)}"
    assert commands <= _commands(), f"{page} names mds-streaming commands that do not exist: {commands - _commands()}"


def test_every_page_is_read():
    assert {"README.md", "CONTRIBUTING.md", "docs/architecture.md"} <= set(_existing_pages())
    assert _cited_paths("see `streaming/format/writer.py` and format/index.py") == [
        "streaming/format/writer.py",
        "format/index.py",
    ]
