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


def dataset_folder(url: str, command: str) -> str:
    """``url``, a dataset's root, checked when it is a local path: a missing folder or an ``index.json`` given in
    place of its folder is a `UsageError` saying so (remote URLs are left to the store, which reports them)."""
    import os

    from streaming.storage.url import split_url

    location = split_url(url)
    if location.scheme not in ("", "file") or location.key.startswith("/Volumes/"):
        return url
    path = location.key
    if os.path.isfile(path) and os.path.basename(path) == "index.json":
        folder = os.path.dirname(path) or "."
        raise UsageError(f"{url} is a dataset's index file: pass its folder instead (mds-streaming {command} {folder})")
    if not os.path.exists(path):
        raise UsageError(f"{url} does not exist: pass the folder that holds the dataset's index.json")
    if not os.path.isdir(path):
        raise UsageError(f"{url} is a file, not a folder: pass the folder that holds the dataset's index.json")
    return url


def unsafe_columns(shard: dict[str, Any]) -> list[str]:
    """The columns of an MDS shard's index entry whose encoding can run code when decoded (``pkl``)."""
    from streaming.format.mds.encodings import is_mds_encoding_safe

    if shard.get("format") != "mds":
        return []
    return [
        name
        for name, encoding in zip(shard.get("column_names") or [], shard.get("column_encodings") or [])
        if not is_mds_encoding_safe(str(encoding))
    ]


def unsafe_refusal(columns: Sequence[str]) -> str:
    """Why the command decoded no sample of a shard with `unsafe_columns`, naming the option that allows it."""
    listed = ", ".join(shown(name) for name in columns)
    return (
        f"column(s) {listed} hold pickled values (pkl), which can run code when decoded: pass --allow-unsafe-types "
        "for a dataset you trust"
    )


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
