"""`XSVWriter`, `CSVWriter`, `TSVWriter`: samples as separator-joined text lines, with a ``.meta`` offsets file."""

from __future__ import annotations

from typing import Any

from streaming.format.errors import EncodingTypeError, UnknownEncodingAssertionError, UnstorableTextError
from streaming.format.sink import ShardSink
from streaming.format.writer import DEFAULT_SIZE_LIMIT, SplitWriter
from streaming.format.xsv.encodings import is_xsv_encoding, xsv_encode

XSV_ENCODINGS = ("str", "int", "float")


class XSVWriter(SplitWriter):
    """Write samples as lines of values joined by ``separator`` (no quoting: values may not contain it).

    Args:
        columns: column name → ``"str"``, ``"int"`` or ``"float"``; stored in name order.
        separator: the value separator.
        newline: line terminator.
        out, keep_local, compression, hashes, size_limit, sink, **kwargs: see :class:`~streaming.format.writer.Writer`.
    """

    format = "xsv"

    def __init__(
        self,
        *,
        columns: dict[str, str],
        separator: str,
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
            raise ValueError(f"columns must be a non-empty dict of column name -> encoding, got {columns!r}.")
        for name, encoding in columns.items():
            if not is_xsv_encoding(encoding):
                raise UnknownEncodingAssertionError(
                    f"Column {name!r} has unknown {self.format.upper()} encoding "
                    f"{encoding!r}. Valid encodings: {', '.join(XSV_ENCODINGS)}."
                )
        if not separator or not newline:
            raise ValueError("separator and newline must be non-empty strings.")
        self.column_names = sorted(columns)
        self.column_encodings = [columns[name] for name in self.column_names]
        self.separator = separator
        self.newline = newline
        for name in self.column_names:
            self._check_text(name, f"Column name {name!r}")
        super().__init__(
            out=out,
            keep_local=keep_local,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            sink=sink,
            **kwargs,
        )

    def _check_text(self, text: str, what: str) -> None:
        if self.separator in text or self.newline in text:
            raise UnstorableTextError(
                f"{what} contains the separator {self.separator!r} or the newline {self.newline!r}; "
                f"{self.format.upper()} shards have no quoting, so it cannot be stored."
            )

    def get_config(self) -> dict[str, Any]:
        return {
            "version": 2,
            "format": self.format,
            "compression": self.compression,
            "hashes": self.hashes,
            "size_limit": self.size_limit,
            "column_encodings": self.column_encodings,
            "column_names": self.column_names,
            "newline": self.newline,
            "separator": self.separator,
        }

    def data_prefix(self) -> bytes:
        return (self.separator.join(self.column_names) + self.newline).encode("utf-8")

    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        values = []
        for name, encoding in zip(self.column_names, self.column_encodings):
            if name not in sample:
                raise KeyError(
                    f"Sample {self.samples_written} has no column {name!r} "
                    f"(the writer's columns are {self.column_names})."
                )
            try:
                text = xsv_encode(encoding, sample[name])
            except Exception as err:
                # The encoding's words first (upstream's), then where: column and sample.
                wrapped = EncodingTypeError if isinstance(err, EncodingTypeError) else TypeError
                raise wrapped(
                    f"{err} [column {name!r} (encoding {encoding!r}) of sample {self.samples_written}]"
                ) from err
            self._check_text(text, f"Column {name!r} of sample {self.samples_written}")
            values.append(text)
        return (self.separator.join(values) + self.newline).encode("utf-8")


class CSVWriter(XSVWriter):
    """`XSVWriter` with separator ``,``; the index records format ``csv`` and no separator."""

    format = "csv"
    separator = ","

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
        super().__init__(
            columns=columns,
            separator=self.separator,
            newline=newline,
            out=out,
            keep_local=keep_local,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            sink=sink,
            **kwargs,
        )

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        del config["separator"]
        return config


class TSVWriter(CSVWriter):
    """`XSVWriter` with separator tab; the index records format ``tsv`` and no separator."""

    format = "tsv"
    separator = "\t"
