"""`XSVReader`, `CSVReader`, `TSVReader`: random access to separator-joined text lines of one shard."""

from __future__ import annotations

from typing import Any

from streaming.format.reader import SplitReader
from streaming.format.xsv.encodings import xsv_decode


class XSVReader(SplitReader):
    """One XSV shard; a sample maps each column name to its decoded value."""

    index_fields: tuple[str, ...] = (
        "column_encodings",
        "column_names",
        "newline",
        "separator",
        *SplitReader.index_fields,
    )

    def __init__(
        self,
        dirname: str,
        split: str | None,
        column_encodings: list[str],
        column_names: list[str],
        compression: str | None,
        hashes: list[str],
        newline: str,
        raw_data: dict[str, Any],
        raw_meta: dict[str, Any],
        samples: int,
        separator: str,
        size_limit: int | None,
        zip_data: dict[str, Any] | None,
        zip_meta: dict[str, Any] | None,
    ) -> None:
        super().__init__(
            dirname, split, compression, hashes, raw_data, raw_meta, samples, size_limit, zip_data, zip_meta
        )
        self.column_encodings = column_encodings
        self.column_names = column_names
        self.newline = newline
        self.separator = separator

    def decode_sample(self, data: bytes) -> dict[str, Any]:
        text = data.decode("utf-8")[: -len(self.newline)]
        values = text.split(self.separator)
        return {
            name: xsv_decode(encoding, value)
            for name, encoding, value in zip(self.column_names, self.column_encodings, values)
        }


class CSVReader(XSVReader):
    """A CSV shard (separator ``,``, not stored in the index)."""

    index_fields: tuple[str, ...] = tuple(field for field in XSVReader.index_fields if field != "separator")

    separator = ","

    def __init__(
        self,
        dirname: str,
        split: str | None,
        column_encodings: list[str],
        column_names: list[str],
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
            dirname,
            split,
            column_encodings,
            column_names,
            compression,
            hashes,
            newline,
            raw_data,
            raw_meta,
            samples,
            self.separator,
            size_limit,
            zip_data,
            zip_meta,
        )


class TSVReader(CSVReader):
    """A TSV shard (separator tab, not stored in the index)."""

    separator = "\t"
