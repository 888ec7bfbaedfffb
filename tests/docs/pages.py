"""The documentation the tests of this folder read: the README, CONTRIBUTING.md and every page of the site.

One owner for which files count as documentation and how a fenced block is cut out of one, so the examples test
and the cited-paths test read the same text.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def pages() -> list[str]:
    """Every documentation file, as a repository-relative path: README.md, CONTRIBUTING.md, docs/**/*.md."""
    site = sorted(str(path.relative_to(REPO)) for path in (REPO / "docs").rglob("*.md"))
    return ["README.md", "CONTRIBUTING.md", *site]


def text(page: str) -> str:
    return (REPO / page).read_text(encoding="utf-8")


def blocks(page: str, language: str) -> list[tuple[int, str]]:
    """``(first line number, source)`` of every fenced block of ``language`` (``""``: no language) in ``page``."""
    content = text(page)
    return [
        (content.count("\n", 0, match.start(2)) + 1, match.group(2))
        for match in _BLOCK.finditer(content)
        if match.group(1) == language
    ]


def first_line(source: str) -> str:
    """How a block is named in the tests' lists: its first non-empty line."""
    return source.strip().splitlines()[0]
