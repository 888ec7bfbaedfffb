"""`JSONWriter`: samples as JSON lines, with a binary ``.meta`` file of line offsets per shard."""

from __future__ import annotations

import json
from typing import Any

from streaming.format.errors import EncodingTypeError, UnknownEncodingAssertionError
from streaming.format.json.encodings import is_json_encoded, is_json_encoding
from streaming.format.sink import ShardSink
from streaming.format.writer import DEFAULT_SIZE_LIMIT, SplitWriter

JSON_ENCODINGS = ("str", "int", "float")


class JSONWriter(SplitWriter):
    """Write samples to JSON-lines shards.

    Args:
        columns: column name → ``"str"``, ``"int"`` or ``"float"``; only these columns are written.
        newline: line terminator.
        out, keep_local, compression, hashes, size_limit, sink, **kwargs: see :class:`~streaming.format.writer.Writer`.
    """

    format = "json"

    def __init__(
        self,
        *,
        columns: dict[str, str],
        newline: str = "\n",
        out: str | tuple[str, str],
        keep_local: bool = False,
        compression: str | None = None,
        hashes: list[str] | None = None,
        size_limit: int | str | None = DEFAULT_SIZE_LIMIT,
        sink: ShardSink | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(columns, dict) or not columns:
            raise ValueError(f"columns must be a non-empty dict of column name -> JSON encoding, got {columns!r}.")
        for name, encoding in columns.items():
            if not is_json_encoding(encoding):
                raise UnknownEncodingAssertionError(
                    f"Column {name!r} has unknown JSON encoding {encoding!r}. "
                    f"Valid encodings: {', '.join(JSON_ENCODINGS)}."
                )
        self.columns = columns
        self.newline = newline
        super().__init__(
            out=out,
            keep_local=keep_local,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            sink=sink,
            **kwargs,
        )

    def get_config(self) -> dict[str, Any]:
        return {
            "version": 2,
            "format": self.format,
            "compression": self.compression,
            "hashes": self.hashes,
            "size_limit": self.size_limit,
            "columns": self.columns,
            "newline": self.newline,
        }

    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        row = {}
        for name, encoding in self.columns.items():
            if name not in sample:
                raise KeyError(
                    f"Sample {self.samples_written} has no column {name!r} "
                    f"(the writer's columns are {sorted(self.columns)})."
                )
            value = sample[name]
            if not is_json_encoded(encoding, value):
                raise EncodingTypeError(
                    f"data should be of type {encoding}, but instead, found as {type(value)} [column {name!r} "
                    f"(encoding {encoding!r}) of sample {self.samples_written}: expected a {encoding}, got "
                    f"{type(value).__name__} {value!r:.80}]."
                )
            row[name] = value
        return (json.dumps(row, sort_keys=True) + self.newline).encode("utf-8")
