"""Pick the reader class for an index entry by its ``format`` and build it."""

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
    shard_format = obj.get("format")
    cls = READERS.get(shard_format)
    if cls is None:
        raise ValueError(f"Unsupported shard format {shard_format!r}; known formats: {', '.join(sorted(READERS))}.")
    params = cls.__init__.__code__.co_varnames[3 : cls.__init__.__code__.co_argcount]
    try:
        return cls(dirname, split, **{key: obj[key] for key in params if key in obj})
    except TypeError as err:
        raise ValueError(f"Index entry for a {shard_format} shard is missing fields: {err}") from None
