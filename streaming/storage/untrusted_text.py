"""Text read from a dataset, a table or a listing, made safe to put in a message or a report line.

A column name, a file name, a URL or a commit's source name comes from data others may write. Put raw into an
exception message, a log line or a report, a control character in it would reach the terminal that shows it
(OSC 52 writes the clipboard, CSI 2J clears the screen) or forge a line of its own. `shown` is the one owner of
that escaping, for the command line and the library alike.
"""

from __future__ import annotations

from typing import Any


def shown(value: Any) -> str:
    """``value`` as text safe to print in one line: every control or invisible formatting character (ESC,
    newline, carriage return, bidi overrides...) written as its escape (``\\x1b``, ``\\n``, ``\\u202e``);
    printable text is returned unchanged."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)
