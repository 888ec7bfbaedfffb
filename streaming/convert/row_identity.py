"""Row identity: when two rows of a table, or a row and a stored sample, are the same row.

The incremental job compares rows as multisets (`net_change`), so it needs one notion of "the same row" that
holds for rows read from a Delta table (Arrow, whichever reader) and for samples already stored in the dataset
(shard bytes, for ``resync``). That notion is the dataset's own: a row's identity is what the dataset stores of
it, column by column, under the dataset's value columns and encodings, with a NULL told apart from the zero
value that stands in for it. So identity is exactly as precise as the dataset (timestamps to the microsecond,
floats bit for bit with -0.0 and NaN kept, decimals as their exact digits, binary as is, nested values as their
JSON text), and a column the dataset does not hold plays no part.

Per value column, in name order: one flag byte (1 = NULL, for encodings with a NULL-mask; ``json`` keeps NULL
as ``null`` itself), then the column's bytes as an MDS sample holding only that column writes them (a 4-byte
length first for variable-size encodings). An array whose elements include NULL cannot be an ``ndarray``; it
is identified by its JSON text behind flag 2 wherever it sits. The identity is the 16-byte BLAKE2b digest of
those bytes.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streaming.convert.arrow_encoder import BatchEncoder, zero_filled
from streaming.convert.json_values import json_payloads
from streaming.convert.type_rules import normalize_batch
from streaming.format.compression import decompress
from streaming.format.index import stored_file
from streaming.format.mds.encodings import get_mds_coder
from streaming.format.mds.nulls import masked_columns
from streaming.storage.dataset_root import DatasetRoot

DIGEST_BYTES = 16
_VALUE, _NULL, _NULL_ELEMENTS = b"\x00", b"\x01", b"\x02"
_U32 = struct.Struct("<I")


def value_columns(columns: Mapping[str, str]) -> dict[str, str]:
    """The value columns of a dataset's ``{name: encoding}`` (its NULL-mask columns dropped), in name order."""
    masks = set(masked_columns(list(columns), list(columns.values())).values())
    return {name: columns[name] for name in sorted(columns) if name not in masks}


def row_identities(rows: pa.Table | pa.RecordBatch, columns: Mapping[str, str]) -> list[bytes]:
    """The identity of every row of ``rows`` under the dataset's value ``columns`` (``{name: encoding}``)."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    values = value_columns(columns)
    missing = [name for name in values if name not in table.column_names]
    if missing:
        raise KeyError(f"The rows lack the dataset's column(s) {missing}; they have {table.column_names}.")
    if table.num_rows == 0:
        return []
    batch = normalize_batch(table.select(list(values)).combine_chunks().to_batches()[0], values)
    per_column = [_column_pieces(batch.column(name), name, encoding) for name, encoding in values.items()]
    return [_digest(parts) for parts in zip(*per_column)]


def stored_identities(data: bytes | memoryview, shard: Mapping[str, Any], columns: Mapping[str, str]) -> list[bytes]:
    """The identity of every sample of one decompressed MDS shard file (``data``), described by its index entry
    ``shard``, under the dataset's value ``columns``: equal to `row_identities` of the rows it was written from.

    Where each needed column lies in every sample is computed for all samples at once (numpy over the offsets
    and the samples' length headers); only the pieces and their digests are made sample by sample.
    """
    names = list(shard["column_names"])
    encodings = dict(zip(names, shard["column_encodings"]))
    masks = masked_columns(names, list(encodings.values()))
    values = value_columns(columns)
    absent = [name for name in values if name not in encodings]
    if absent:
        raise ValueError(f"A shard of the dataset lacks its column(s) {absent} (it has {names}).")
    blob = bytes(data)
    count = int.from_bytes(blob[:4], "little")
    if count == 0:
        return []
    where = _column_bounds(blob, count, names, list(shard["column_sizes"]))
    per_column = []
    for name, encoding in values.items():
        begins, ends = where[name]
        stored_encoding = encodings[name]
        variable = get_mds_coder(stored_encoding).size is None
        if "json" in (stored_encoding, encoding) and stored_encoding != encoding:
            pieces = [_stored_piece(blob[b:e], stored_encoding, encoding) for b, e in zip(begins, ends)]
        elif variable:
            pieces = [_VALUE + _U32.pack(e - b) + blob[b:e] for b, e in zip(begins, ends)]
        else:
            pieces = [_VALUE + blob[b:e] for b, e in zip(begins, ends)]
        mask = masks.get(name)
        if mask is not None:
            # Under a `json` dataset encoding (a column a later shard widened) NULL is the text `null`, as the
            # table's rows are identified (`json_payloads`); elsewhere its flag.
            null = _VALUE + _with_length(b"null") if encoding == "json" else _NULL
            flags = [blob[b] for b in where[mask][0]]
            pieces = [null if flag else piece for flag, piece in zip(flags, pieces)]
        per_column.append(pieces)
    return [_digest(parts) for parts in zip(*per_column)]


def _column_bounds(
    blob: bytes, count: int, names: list[str], sizes: list[int | None]
) -> dict[str, tuple[list[int], list[int]]]:
    """``{column: (begins, ends)}`` of every sample of an MDS shard: each sample is the uint32 lengths of its
    variable-size columns, then every column in order. A sample whose columns do not add up to its length (a
    shard other than its index says) is an error rather than a wrong identity."""
    raw = np.frombuffer(blob, np.uint8)
    offsets = np.frombuffer(blob, "<u4", count + 1, 4).astype(np.int64)
    starts, stops = offsets[:-1], offsets[1:]
    variable = [index for index, size in enumerate(sizes) if size is None]
    if int(stops.max(initial=0)) > len(blob) or np.any(starts + 4 * len(variable) > stops):
        raise ValueError(f"An MDS shard's sample offsets run past its {len(blob)} bytes or its samples' headers.")
    lengths = {}
    for slot, index in enumerate(variable):
        at = starts + 4 * slot
        lengths[index] = (
            raw[at].astype(np.int64)
            | raw[at + 1].astype(np.int64) << 8
            | raw[at + 2].astype(np.int64) << 16
            | raw[at + 3].astype(np.int64) << 24
        )
    position = starts + 4 * len(variable)
    bounds = {}
    for index, (name, size) in enumerate(zip(names, sizes)):
        end = position + (lengths[index] if size is None else size)
        bounds[name] = (position.tolist(), end.tolist())
        position = end
    if not np.array_equal(position, stops):
        raise ValueError("An MDS shard's samples do not hold the columns its index lists (column sizes differ).")
    return bounds


def net_change(plus: pa.Table, minus: pa.Table, columns: Mapping[str, str]) -> tuple[pa.Table, int]:
    """The multiset difference ``plus - minus`` by row identity, and the size of ``minus - plus``.

    Returns the rows of ``plus`` that no row of ``minus`` cancels (in ``plus`` order; of equal rows the first
    ones are cancelled) and how many rows of ``minus`` no row of ``plus`` cancels.
    """
    added, removed = net_rows(plus, minus, columns)
    return added, removed.num_rows


def net_rows(plus: pa.Table, minus: pa.Table, columns: Mapping[str, str]) -> tuple[pa.Table, pa.Table]:
    """Both multiset differences by row identity: the rows of ``plus`` no row of ``minus`` cancels and the rows
    of ``minus`` no row of ``plus`` cancels (each in its own order; of equal rows the first ones are cancelled).
    A mirror run needs the second as rows (their keys), the append-only job only its size."""
    minus_ids = row_identities(minus, columns)
    left = Counter(minus_ids)
    kept = []
    for index, identity in enumerate(row_identities(plus, columns)):
        if left[identity]:
            left[identity] -= 1
        else:
            kept.append(index)
    gone = []
    for index in reversed(range(len(minus_ids))):  # the last copies of an identity are the ones left over
        if left[minus_ids[index]]:
            left[minus_ids[index]] -= 1
            gone.append(index)
    return plus.take(pa.array(kept, pa.int64())), minus.take(pa.array(gone[::-1], pa.int64()))


def subtract_identities(rows: pa.Table, held: Counter, columns: Mapping[str, str]) -> pa.Table:
    """The rows of ``rows`` left after cancelling, identity by identity, the multiset ``held`` (not changed)."""
    left = Counter(held)
    kept = []
    for index, identity in enumerate(row_identities(rows, columns)):
        if left[identity]:
            left[identity] -= 1
        else:
            kept.append(index)
    return rows.take(pa.array(kept, pa.int64()))


def _digest(parts: Sequence[bytes]) -> bytes:
    return hashlib.blake2b(b"".join(parts), digest_size=DIGEST_BYTES).digest()


def _column_pieces(array: pa.Array, name: str, encoding: str) -> list[bytes]:
    """Each row's identity piece of one column: its flag byte and its bytes as the dataset stores them."""
    if encoding == "json":
        return [_VALUE + _with_length(payload) for payload in json_payloads(array)]
    nulls = np.asarray(array.is_null(), dtype=bool)
    pieces: list[bytes] = [_NULL] * len(array)
    holders = _rows_with_null_elements(array) if encoding.startswith("ndarray") else np.zeros(len(array), bool)
    plain = np.flatnonzero(~nulls & ~holders)
    if len(plain):
        encoded = _encoded(array.take(pa.array(plain)), name, encoding)
        for row, piece in zip(plain.tolist(), encoded):
            pieces[row] = _VALUE + piece
    special = np.flatnonzero(~nulls & holders)
    if len(special):
        for row, payload in zip(special.tolist(), json_payloads(array.take(pa.array(special)))):
            pieces[row] = _NULL_ELEMENTS + _with_length(payload)
    return pieces


def _encoded(array: pa.Array, name: str, encoding: str) -> Iterator[bytes]:
    """The bytes an MDS sample holding only this column stores for each value (none of them NULL)."""
    batch = pa.RecordBatch.from_arrays([zero_filled(array)], [name])
    buffer, sizes = BatchEncoder({name: encoding}).encode(batch)
    position = 0
    for size in sizes.tolist():
        yield bytes(buffer[position : position + size])
        position += size


def _rows_with_null_elements(array: pa.Array) -> np.ndarray:
    """Which rows of a list column hold a NULL element."""
    flags = np.zeros(len(array), bool)
    flat = pc.list_flatten(array)
    if flat.null_count:
        parents = pc.filter(pc.list_parent_indices(array), pc.is_null(flat))
        flags[np.asarray(parents, dtype=np.int64)] = True
    return flags


def _with_length(payload: bytes) -> bytes:
    return _U32.pack(len(payload)) + payload


def _stored_piece(value: bytes, stored_encoding: str, encoding: str) -> bytes:
    """The identity piece of a stored value that is not NULL (see `_column_pieces` for the table side)."""
    coder = get_mds_coder(stored_encoding)
    if stored_encoding == "json":
        if encoding == "json":
            return _VALUE + _with_length(value)
        # An array column the dataset widened to JSON (NULL elements): identified as `_column_pieces` would.
        items = json.loads(value)
        if items is not None and any(item is None for item in items):
            return _NULL_ELEMENTS + _with_length(value)
        return _VALUE + _rebuilt_ndarray(items, encoding)
    if encoding == "json" and stored_encoding.startswith("ndarray"):
        # A shard written before a later one widened the column to JSON: the table's rows are identified by
        # their JSON text now (`json_payloads`), so this array is too.
        return _VALUE + _with_length(json.dumps(coder.decode(value).tolist()).encode("utf-8"))
    return _VALUE + (_with_length(value) if coder.size is None else value)


def _rebuilt_ndarray(items: list[Any], encoding: str) -> bytes:
    """The ndarray bytes of a JSON list of numbers, as the dataset's ``ndarray`` encoding writes them."""
    coder = get_mds_coder(encoding)
    data = coder.encode(np.asarray(items, dtype=getattr(coder, "dtype", None) or None))
    return data if coder.size is not None else _with_length(data)


def dataset_identities(
    destination: DatasetRoot, shards: Sequence[Mapping[str, Any]], columns: Mapping[str, str]
) -> Counter:
    """The identities of every sample the dataset's MDS ``shards`` hold, as a multiset (reads each shard once)."""
    found: Counter = Counter()
    for shard in shards:
        if shard.get("format") != "mds":
            raise ValueError(f"The dataset holds a {shard.get('format')!r} shard; only MDS shards can be compared.")
        stored = stored_file(dict(shard))
        data = destination.read_bytes(stored["basename"])
        if shard.get("zip_data"):
            data = decompress(shard.get("compression"), data, max_size=shard["raw_data"]["bytes"])
        found.update(stored_identities(data, shard, columns))
    return found
