"""`MDSWriter`: samples as packed binary columns in one file per shard (the MDS format)."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

from streaming.format.errors import (
    FixedSizeError,
    MalformedEncodingError,
    NonStrEncodingError,
    UnknownEncodingAssertionError,
    UnknownEncodingError,
    with_context,
)
from streaming.format.index import RAW_DATA, ZIP_DATA, FileInfo
from streaming.format.mds.encodings import Int, Str, get_mds_coder, get_mds_encodings, is_mds_encoding
from streaming.format.sink import ShardSink
from streaming.format.writer import DEFAULT_SIZE_LIMIT, Chunks, JointWriter, SampleEncoder, offsets_table

_INT64 = struct.Struct("<q")


def _compile_encoder(plan: list[tuple[str, str, int | None]], slow: SampleEncoder) -> SampleEncoder:
    """Generate one straight-line function that encodes a sample of this schema.

    It does what the column-by-column path does, without its per-column loop: ``str`` and ``int`` values are
    encoded inline, ``bytes`` pass through (upstream's rule for every encoding), the rest call their coder.
    Any failure falls back to ``slow``, the column-by-column path, which raises the detailed error.
    """
    scope: dict[str, Any] = {"slow": slow, "pack_int": _INT64.pack}
    body = []
    variable = []
    fixed_total = 0
    for i, (name, encoding, size) in enumerate(plan):
        coder = get_mds_coder(encoding)
        scope[f"enc{i}"] = coder.encode
        value, data = f"v{i}", f"d{i}"
        generic = f"({value} if type({value}) is bytes else enc{i}({value}))"
        # Inlined only for the built-in classes themselves: a subclass registered in their place keeps its encode.
        inline = {
            Str: f"{value}.encode('utf-8') if type({value}) is str else {generic}",
            Int: f"pack_int({value}) if type({value}) is int else {generic}",
        }
        body.append(f"{value} = sample[{name!r}]")
        body.append(f"{data} = {inline.get(type(coder), generic)}")
        if size is None:
            variable.append(data)
        else:
            fixed_total += size
            body.append(f"if len({data}) != {size}: raise ValueError")
    lengths = [f"len({data})" for data in variable]
    scope["pack_sizes"] = struct.Struct(f"<{len(variable)}I").pack
    head = [f"pack_sizes({', '.join(lengths)})"] if variable else []
    chunks = ", ".join(head + [f"d{i}" for i in range(len(plan))])
    total = " + ".join([str(fixed_total + 4 * len(variable)), *lengths])
    source = "\n".join(
        [
            "def encode(sample):",
            "    try:",
            *(f"        {line}" for line in body),
            f"        return ({chunks},), {total}",
            "    except Exception:",
            "        return slow(sample)",
        ]
    )
    exec(compile(source, "<mds sample encoder>", "exec"), scope)  # noqa: S102 - source built from the schema
    return scope["encode"]


class MDSWriter(JointWriter):
    """Write samples to MDS shards.

    Args:
        columns: column name → MDS encoding (e.g. ``{"tokens": "ndarray:int32", "text": "str"}``).
        out, keep_local, compression, hashes, size_limit, sink, **kwargs: see :class:`~streaming.format.writer.Writer`.
    """

    format = "mds"
    extra_bytes_per_sample = 4  # the sample's entry in the offsets table

    def __init__(
        self,
        *,
        columns: dict[str, str],
        out: str | tuple[str, str],
        keep_local: bool = False,
        compression: str | None = None,
        hashes: list[str] | None = None,
        size_limit: int | str | None = DEFAULT_SIZE_LIMIT,
        sink: ShardSink | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(columns, dict) or not columns:
            raise ValueError(f"columns must be a non-empty dict of column name -> MDS encoding, got {columns!r}.")
        for name, encoding in columns.items():
            if not isinstance(encoding, str) or not is_mds_encoding(encoding):
                raise _unknown_encoding_error(encoding)(
                    f"MDSWriter passed column `{name}` with encoding `{encoding}` is unsupported: unknown MDS encoding "
                    f"{encoding!r}. Valid encodings: "
                    f"{', '.join(sorted(get_mds_encodings()))} (ndarray also as ndarray:<dtype>[:<shape>])."
                )
        self.columns = columns
        self.column_names = sorted(columns)
        self.column_encodings = [columns[name] for name in self.column_names]
        self.column_sizes = [get_mds_coder(enc).size for enc in self.column_encodings]
        self._plan = list(zip(self.column_names, self.column_encodings, self.column_sizes))
        self._pack_sizes = struct.Struct(f"<{sum(size is None for size in self.column_sizes)}I").pack
        super().__init__(
            out=out,
            keep_local=keep_local,
            compression=compression,
            hashes=hashes,
            size_limit=size_limit,
            sink=sink,
            **kwargs,
        )
        self._header = json.dumps(self.get_config(), sort_keys=True).encode("utf-8")
        self.extra_bytes_per_shard = 4 + 4 + len(self._header)
        self.extra_bytes_per_sample = 4
        self.new_shard_size = self.extra_bytes_per_shard

    def get_config(self) -> dict[str, Any]:
        return {
            "version": 2,
            "format": self.format,
            "compression": self.compression,
            "hashes": self.hashes,
            "size_limit": self.size_limit,
            "column_encodings": self.column_encodings,
            "column_names": self.column_names,
            "column_sizes": self.column_sizes,
        }

    def sample_encoder(self) -> SampleEncoder:
        return _compile_encoder(self._plan, self._encode_columns)

    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        return b"".join(self._encode_compiled(sample)[0])

    def _encode_columns(self, sample: dict[str, Any]) -> tuple[Sequence[bytes], int]:
        """Encode column by column, checking each value and naming the column and sample of any error."""
        sizes = []
        parts = []
        for name, encoding, size in self._plan:
            try:
                value = sample[name]
            except KeyError:
                raise KeyError(
                    f"Sample {self.samples_written} has no column {name!r} "
                    f"(the writer's columns are {self.column_names})."
                ) from None
            except TypeError:
                raise TypeError(f"Sample {self.samples_written} must be a dict, got {type(sample).__name__}.") from None
            if type(value) is bytes:
                data = value
            else:
                try:
                    data = get_mds_coder(encoding).encode(value)
                except Exception as err:
                    raise with_context(
                        err, f"Column {name!r} (encoding {encoding!r}) of sample {self.samples_written}"
                    ) from err
            if size is None:
                sizes.append(len(data))
            elif len(data) != size:
                raise FixedSizeError(
                    f"Column {name!r} (encoding {encoding!r}) of sample {self.samples_written}: "
                    f"encoded to {len(data)} bytes but the encoding has a fixed size of {size} bytes; "
                    f"was this value typed with the right encoding?"
                )
            parts.append(data)
        if sizes:
            parts.insert(0, self._pack_sizes(*sizes))
        return parts, sum(map(len, parts))

    def encode_shard(self, chunks: Chunks, sample_sizes: list[int]) -> list[Chunks]:
        first = 4 + 4 * (len(sample_sizes) + 1) + len(self._header)
        return [[offsets_table(first, sample_sizes), self._header, *chunks]]

    def shard_entry(self, num_samples: int, files: list[tuple[FileInfo, FileInfo | None]]) -> dict[str, Any]:
        ((raw, zipped),) = files
        return {
            **self.get_config(),
            "samples": num_samples,
            RAW_DATA: raw.to_json(),
            ZIP_DATA: zipped.to_json() if zipped else None,
        }


def _unknown_encoding_error(encoding: Any) -> type[UnknownEncodingError]:
    """The error class of an unknown MDS encoding that also has the type upstream raised for it."""
    if not isinstance(encoding, str):
        return NonStrEncodingError
    try:
        get_mds_coder(encoding)
    except MalformedEncodingError:
        return UnknownEncodingAssertionError
    except Exception:  # noqa: BLE001 - any other failure to build a coder is a plain unknown encoding
        pass
    return UnknownEncodingError
