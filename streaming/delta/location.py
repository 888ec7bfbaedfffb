"""Whether a table argument names a Delta table by its path (any URL) or is a table name, which only Spark reads."""

from __future__ import annotations

import os

from streaming.storage.url import is_remote


def looks_like_path(text: str) -> bool:
    """Paths and URLs are read as Delta tables; anything else is a table name."""
    return is_remote(text) or text.startswith(("/", ".", "~", "file:")) or os.sep in text or os.path.exists(text)


def table_name_parts(name: str) -> list[str]:
    """The parts of a table name (`t`, `s.t`, `c.s.t`), each bare or in backticks (a doubled backtick is one)."""
    parts: list[str] = []
    position = 0
    while True:
        if name.startswith("`", position):
            pieces, start = [], position + 1
            while True:
                end = name.find("`", start)
                if end < 0:
                    raise ValueError(f"Table name {name!r} has an unclosed backtick.")
                pieces.append(name[start:end])
                if not name.startswith("``", end):
                    break
                pieces.append("`")
                start = end + 2
            part, position = "".join(pieces), end + 1
        else:
            end = name.find(".", position)
            end = len(name) if end < 0 else end
            part, position = name[position:end], end
        if not part:
            raise ValueError(
                f"Table name {name!r} has an empty part; expected table, schema.table or catalog.schema.table."
            )
        parts.append(part)
        if position == len(name):
            return parts
        if name[position] != ".":
            raise ValueError(f"Table name {name!r}: expected '.' after the backticked part {part!r}.")
        position += 1


def quote_table_name(name: str) -> str:
    """`name` as a SQL identifier: every part in backticks, backticks inside doubled."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in table_name_parts(name))
