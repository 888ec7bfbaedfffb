"""Delta tables whose data files another writer wrote: deltalake makes the table, pyarrow then rewrites its one data
file with the physical types (or VARIANT bytes) deltalake cannot write, and the log says what the file holds; and the
bytes of VARIANT values, built as the encoding lays them out."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def rewritten_table(folder: Path, rows: pa.Table, **write_options: object) -> str:
    """A Delta table of ``rows``, its one data file written by pyarrow with ``write_options`` (INT96, a unit of
    seconds, milliseconds or nanoseconds...)."""
    from deltalake import write_deltalake

    schema = pa.schema([field.with_type(_micros(field.type)) for field in rows.schema])
    write_deltalake(str(folder), rows.cast(schema, safe=False))  # the file pyarrow then writes holds the values
    (data,) = folder.glob("*.parquet")
    pq.write_table(rows, data, **write_options)
    return str(folder)


def variant_table(folder: Path, metadata: list[bytes | None], values: list[bytes | None]) -> str:
    """A Delta table of an ``id`` and a VARIANT column ``v`` of the given encoded rows (a row whose metadata is
    None is SQL NULL), with the ``variantType`` reader feature, as Spark writes one."""
    from deltalake import write_deltalake

    ids = pa.array(range(len(values)), pa.int32())
    write_deltalake(str(folder), pa.table({"id": ids}))
    (data,) = folder.glob("*.parquet")
    valid = [item is not None for item in metadata]
    variant = pa.StructArray.from_arrays(
        [
            pa.array([item or b"" for item in metadata], pa.binary()),
            pa.array([item or b"" for item in values], pa.binary()),
        ],
        ["metadata", "value"],
        mask=pa.array([not ok for ok in valid]),
    )
    pq.write_table(pa.table({"id": ids, "v": variant}), data)
    log = folder / "_delta_log" / "00000000000000000000.json"
    text = log.read_text()
    column = '{\\"name\\":\\"v\\",\\"type\\":\\"variant\\",\\"nullable\\":true,\\"metadata\\":{}}'
    text = text.replace('\\"metadata\\":{}}]}', '\\"metadata\\":{}},' + column + "]}", 1)
    text = text.replace('"minReaderVersion":1', '"minReaderVersion":3,"readerFeatures":["variantType"]', 1)
    text = text.replace('"minWriterVersion":2', '"minWriterVersion":7,"writerFeatures":["variantType"]', 1)
    log.write_text(text)
    return str(folder)


# -- VARIANT bytes, as Parquet's VariantEncoding.md lays them out ---------------------------------------------
def metadata(*keys: str) -> bytes:
    offsets, strings = [0], b""
    for key in keys:
        strings += key.encode()
        offsets.append(len(strings))
    return bytes([0x01, len(keys), *offsets]) + strings


def primitive(type_id: int, payload: bytes = b"") -> bytes:
    return bytes([type_id << 2]) + payload


def short(text: str) -> bytes:
    raw = text.encode()
    return bytes([(len(raw) << 2) | 1]) + raw


def array(*elements: bytes) -> bytes:
    """An array with 1-byte offsets, or 4-byte ones where its elements need them."""
    offsets, data = [0], b""
    for element in elements:
        data += element
        offsets.append(len(data))
    width = 1 if len(data) < 256 else 4
    table = b"".join(offset.to_bytes(width, "little") for offset in offsets)
    return bytes([((width - 1) << 2) | 3, len(elements)]) + table + data


def string(text: str) -> bytes:
    raw = text.encode()
    return primitive(16, len(raw).to_bytes(4, "little") + raw)


def obj(fields: list[tuple[int, bytes]]) -> bytes:
    offsets, data = [], b""
    for _, value in fields:
        offsets.append(len(data))
        data += value
    offsets.append(len(data))
    return bytes([2, len(fields), *(key for key, _ in fields), *offsets]) + data


def _micros(data_type: pa.DataType) -> pa.DataType:
    return pa.timestamp("us", data_type.tz) if pa.types.is_timestamp(data_type) else data_type
