"""The registry of reader classes by shard ``format``, and `reader_from_json`, which builds one shard's reader.

Not to be confused with `streaming.format.reader` (the `Reader` base classes) or `streaming.dataset.reader_pool`
(the readers of a dataset's shards, built on first use).
"""

from __future__ import annotations

from typing import Any

from streaming.format.json.reader import JSONReader
from streaming.format.mds.reader import MDSReader
from streaming.format.reader import Reader
from streaming.format.xsv.reader import CSVReader, TSVReader, XSVReader

READERS: dict[str, type[Reader]] = {
    "csv": CSVReader,
    "json": JSONReader,
    "mds": MDSReader,
    "tsv": TSVReader,
    "xsv": XSVReader,
}


def reader_from_json(dirname: str, split: str | None, obj: dict[str, Any]) -> Reader:
    """Build the reader of one shard from its ``index.json`` entry.

    Keys this package does not know are ignored, so indexes from newer writers still load.
    """
    shard_format: Any = obj.get("format")  # any JSON value: only a known name finds a reader
    cls = READERS.get(shard_format) if isinstance(shard_format, str) else None
    if cls is None:
        raise ValueError(f"Unsupported shard format {shard_format!r}; known formats: {', '.join(sorted(READERS))}.")
    return cls.from_json(dirname, split, obj)
