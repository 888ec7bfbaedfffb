"""`MDSWriter`: samples as packed binary columns in one file per shard (the MDS format)."""

from __future__ import annotations

import json
import struct
from typing import Any, Callable

import numpy as np

from streaming.format.errors import UnknownEncodingError, with_context
from streaming.format.index import FileInfo
from streaming.format.mds.encodings import get_mds_coder, get_mds_encodings, is_mds_encoding
from streaming.format.writer import DEFAULT_SIZE_LIMIT, Writer

_INT64 = struct.Struct("<q")


def _column_encoder(encoding: str) -> Callable[[Any], bytes]:
    """Return the encode function of one column, with direct paths for the most common encodings."""
    if encoding == "str":
        def encode_str(value: Any) -> bytes:
            if type(value) is str:
                return value.encode("utf-8")
            return get_mds_coder("str").encode(value)
        return encode_str
    if encoding == "int":
        pack = _INT64.pack
        coder = get_mds_coder("int")

        def encode_int(value: Any) -> bytes:
            if type(value) is int:
                return pack(value)
            return coder.encode(value)
        return encode_int
    return get_mds_coder(encoding).encode


class MDSWriter(Writer):
    """Write samples to MDS shards.

    Args:
        columns: column name → MDS encoding (e.g. ``{"tokens": "ndarray:int32", "text": "str"}``).
        out, keep_local, compression, hashes, size_limit, **kwargs: see :class:`~streaming.format.writer.Writer`.
    """

    format = "mds"

    def __init__(self, *, columns: dict[str, str], out: str | tuple[str, str], keep_local: bool = False,
                 compression: str | None = None, hashes: list[str] | None = None,
                 size_limit: int | str | None = DEFAULT_SIZE_LIMIT, **kwargs: Any) -> None:
        if not isinstance(columns, dict) or not columns:
            raise ValueError(f"columns must be a non-empty dict of column name -> MDS encoding, got {columns!r}.")
        for name, encoding in columns.items():
            if not isinstance(encoding, str) or not is_mds_encoding(encoding):
                raise UnknownEncodingError(
                    f"Column {name!r} has unknown MDS encoding {encoding!r}. Valid encodings: "
                    f"{', '.join(sorted(get_mds_encodings()))} (ndarray also as ndarray:<dtype>[:<shape>]).")
        self.columns = columns
        self.column_names = sorted(columns)
        self.column_encodings = [columns[name] for name in self.column_names]
        self.column_sizes = [get_mds_coder(enc).size for enc in self.column_encodings]
        self._plan = [(name, enc, size, _column_encoder(enc))
                      for name, enc, size in zip(self.column_names, self.column_encodings, self.column_sizes)]
        self._num_variable = sum(size is None for size in self.column_sizes)
        self._pack_sizes = struct.Struct(f"<{self._num_variable}I").pack
        super().__init__(out=out, keep_local=keep_local, compression=compression, hashes=hashes,
                         size_limit=size_limit, **kwargs)
        self._header = json.dumps(self.get_config(), sort_keys=True).encode("utf-8")
        self.extra_bytes_per_shard = 4 + 4 + len(self._header)
        self.extra_bytes_per_sample = 4
        self.new_shard_size = self.extra_bytes_per_shard

    def get_config(self) -> dict[str, Any]:
        return {"version": 2, "format": self.format, "compression": self.compression, "hashes": self.hashes,
                "size_limit": self.size_limit, "column_encodings": self.column_encodings,
                "column_names": self.column_names, "column_sizes": self.column_sizes}

    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        sizes = []
        parts = []
        for name, encoding, size, encode in self._plan:
            try:
                value = sample[name]
            except KeyError:
                raise KeyError(f"Sample {self.samples_written} has no column {name!r} "
                               f"(the writer's columns are {self.column_names}).") from None
            except TypeError:
                raise TypeError(f"Sample {self.samples_written} must be a dict, got {type(sample).__name__}.") from None
            if type(value) is bytes:
                data = value
            else:
                try:
                    data = encode(value)
                except Exception as err:  # noqa: BLE001 - re-raised with the column and sample named
                    raise with_context(err, f"Column {name!r} (encoding {encoding!r}) of sample "
                                            f"{self.samples_written}") from err
            if size is None:
                sizes.append(len(data))
            elif len(data) != size:
                raise ValueError(f"Column {name!r} (encoding {encoding!r}) of sample {self.samples_written}: "
                                 f"encoded to {len(data)} bytes but the encoding has a fixed size of {size} bytes; "
                                 f"was this value typed with the right encoding?")
            parts.append(data)
        if sizes:
            parts.insert(0, self._pack_sizes(*sizes))
        return b"".join(parts)

    def encode_shard(self, samples: list[bytes]) -> list[bytes]:
        count = len(samples)
        lengths = np.fromiter(map(len, samples), dtype=np.int64, count=count)
        offsets = np.empty(count + 1, dtype=np.int64)
        offsets[0] = 4 + 4 * (count + 1) + len(self._header)
        np.cumsum(lengths, out=offsets[1:])
        offsets[1:] += offsets[0]
        head = np.uint32(count).tobytes() + offsets.astype("<u4").tobytes() + self._header
        return [b"".join([head, *samples])]

    def shard_entry(self, num_samples: int, files: list[tuple[FileInfo, FileInfo | None]]) -> dict[str, Any]:
        (raw, zipped), = files
        return {**self.get_config(), "samples": num_samples, "raw_data": raw.to_json(),
                "zip_data": zipped.to_json() if zipped else None}
