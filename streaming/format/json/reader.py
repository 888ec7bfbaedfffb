"""`JSONReader`: random access to the JSON lines of one shard through its offsets file."""

from __future__ import annotations

import json
from typing import Any

from streaming.format.reader import SplitReader


class JSONReader(SplitReader):
    """One JSON-lines shard; a sample is the parsed JSON object of its line."""

    index_fields: tuple[str, ...] = ("columns", "newline", *SplitReader.index_fields)

    def __init__(
        self,
        dirname: str,
        split: str | None,
        columns: dict[str, str],
        compression: str | None,
        hashes: list[str],
        newline: str,
        raw_data: dict[str, Any],
        raw_meta: dict[str, Any],
        samples: int,
        size_limit: int | None,
        zip_data: dict[str, Any] | None,
        zip_meta: dict[str, Any] | None,
    ) -> None:
        super().__init__(
            dirname, split, compression, hashes, raw_data, raw_meta, samples, size_limit, zip_data, zip_meta
        )
        self.columns = columns
        self.newline = newline

    def decode_sample(self, data: bytes) -> dict[str, Any]:
        return json.loads(data)

    def get_item(self, idx: int) -> dict[str, Any]:
        return json.loads(self.get_sample_data(idx))
