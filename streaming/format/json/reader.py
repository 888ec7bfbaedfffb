"""`JSONReader`: random access to the JSON lines of one shard through its offsets file."""

from __future__ import annotations

import json
from typing import Any

from streaming.format.errors import ShardCorruptError
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
        return self._parse(data, None)

    def get_item(self, idx: int) -> dict[str, Any]:
        return self._parse(self.get_sample_data(idx), idx)

    def _parse(self, data: bytes, idx: int | None) -> dict[str, Any]:
        """One sample's JSON; a line that is not JSON, or nests past Python's limit, is `ShardCorruptError`."""
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as err:
            sample = "a sample" if idx is None else f"sample {idx}"
            reason = "it nests too deeply" if isinstance(err, RecursionError) else f"{type(err).__name__}: {err}"
            raise ShardCorruptError(
                f"Shard file {self.local_path(self.raw_data.basename)}, {sample}: not a JSON sample ({reason})."
            ) from None
