"""How commands talk: `--json` documents on stdout, aligned text tables, progress bars on stderr, exit codes.

Everything a command prints as text goes through `shown` (`streaming.storage.untrusted_text`): text read from a
dataset is untrusted, and a raw control character in it would reach the terminal (JSON output escapes them itself).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from tqdm import tqdm

from streaming.storage.untrusted_text import shown

OK = 0
PROBLEMS = 1
USAGE = 2


class UsageError(Exception):
    """A command-line argument that cannot work; the message says what to pass instead (exit code 2)."""


def human_bytes(size: float) -> str:
    """`1536` → `1.5 KiB`."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def counted(number: int, noun: str) -> str:
    """``"1 shard"``, ``"4 shards"``: a count with its noun in the right number."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _shown_lines(text: str) -> str:
    """``text`` with its lines kept and everything else `shown` (what a message or report built in full prints)."""
    return "\n".join(shown(line) for line in text.split("\n"))


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """Rows as a text table with aligned columns (numbers right-aligned); every cell `shown`."""
    cells = [[shown(value) for value in row] for row in rows]
    widths = [max([len(header)] + [len(row[i]) for row in cells]) for i, header in enumerate(headers)]
    numeric = [all(_is_number(row[i]) for row in rows) and bool(rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            value.rjust(width) if right else value.ljust(width) for value, width, right in zip(values, widths, numeric)
        ).rstrip()

    return "\n".join([line(headers), line(["-" * width for width in widths]), *(line(row) for row in cells)])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def emit(args: argparse.Namespace, document: dict[str, Any], text: str) -> None:
    """Print the command's result: `document` as JSON with `--json`, else the human-readable `text`."""
    if args.json:
        json.dump(document, sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(_shown_lines(text.rstrip("\n")) + "\n")
    sys.stdout.flush()


def progress(args: argparse.Namespace, iterable: Iterable[Any] | None = None, **kwargs: Any) -> tqdm:
    """A progress bar on stderr; hidden with `--quiet` and when stderr is not a terminal."""
    return tqdm(iterable, disable=True if args.quiet else None, file=sys.stderr, dynamic_ncols=True, **kwargs)


def note(args: argparse.Namespace, message: str) -> None:
    """A remark for the person at the terminal (stderr), silent with `--quiet`."""
    if not args.quiet:
        print(_shown_lines(message), file=sys.stderr)


def error_line(command: str, message: str) -> str:
    """The line a failed command prints: ``message`` `shown` whole (a crafted name in it forges no line) and
    `scrub`-bed of any credential it quotes."""
    from streaming.storage.secrets import scrub  # the command line's start imports only what parses arguments

    return f"mds-streaming {command}: error: {shown(scrub(message))}"
