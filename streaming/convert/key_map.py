"""The key map of a mirror dataset: which shard and sample hold each key of the table, kept beside the dataset.

A mirror run (`streaming.incremental.mirror`) removes the rows a table change deleted or updated; the key map finds
the shards that hold them, so only those shards are read and rewritten. Layout: Parquet files under
``_mds_keys/`` with three columns, ``key`` (the key's identity: `row_identities` of the key columns alone, a
16-byte BLAKE2b digest of what the dataset stores of them), ``shard`` (the raw data basename of the shard entry,
which no other entry shares) and ``sample`` (the sample's index in that shard).

Why this layout: each run writes one file holding only the entries of the shards it added (new rows and the
copies of the shards it rewrote), so a run writes in proportion to its change; the newest run record lists the
files that make up the map in its ``files`` (so the map changes with the commit, atomically, and ``vacuum`` keeps
them), and an entry counts only while its shard is in the dataset's state, so the entries of a rewritten shard
need no rewriting of older files. Once a map has more than `MAX_FILES` files, or one of them holds more rows than
the dataset will have samples (rows deleted since it was written), the run writes the whole live map as one file
instead (compaction), so a run reads at most `MAX_FILES` files, none of more rows than the dataset's samples.
`load` checks that from each file's footer before reading it (`streaming.storage.parquet_bounds`): a small file
of millions of identical rows planted in ``_mds_keys/`` is refused before it takes any memory. A run reads the
whole map (about 17 bytes a row in Parquet: digests do not compress): small next to the shards of any real
dataset, and it also proves every new key unique in the table.

The identity is a digest, not the key's value, so the map and the audit (a mirror commit's ``audit``) name no key
in clear. It is a pseudonym, not anonymity: whoever has a key's value (or can enumerate a small key space) can
compute its digest, which is also how a user shows that a given key was removed (`key_digests`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streaming.convert.row_identity import row_identities, stored_identities
from streaming.format.commit_log import LogDamagedError, Snapshot
from streaming.format.compression import decompress
from streaming.format.index import RAW_DATA, stored_file
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.parquet_bounds import ParquetBoundsError, bounded_row_groups

KEYS_FOLDER = "_mds_keys"
#: A map of more files than this is compacted into one by the run that would add the next.
MAX_FILES = 16
#: The ``mode`` a mirror run records in its run record.
MIRROR = "mirror"
SCHEMA = pa.schema([("key", pa.binary()), ("shard", pa.string()), ("sample", pa.int64())])
#: The most bytes a map row may take decompressed: a 16-byte key, a shard's file name, a sample number, offsets.
ROW_BYTES = 512
#: Rows a map file written by `write` holds per row group (so a reader holds one group of them at a time).
GROUP_ROWS = 1 << 16


class LiveMap(NamedTuple):
    """The live entries of a key map, and the most rows one of its files holds (live or not)."""

    entries: pa.Table
    largest_file: int


def shard_id(entry: Mapping[str, Any]) -> str:
    """The name a shard entry has in the key map: its raw data basename (unique within a dataset)."""
    return str(entry[RAW_DATA]["basename"])


def mirror_record(state: Snapshot) -> dict[str, Any] | None:
    """The newest run record of ``state`` if a mirror run wrote it (the state then has a key map), else None."""
    latest = (state.metadata or {}).get("latest") or {}
    return latest if latest.get("mode") == MIRROR else None


def key_digests(rows: pa.Table, key: Mapping[str, str]) -> list[bytes]:
    """The identity of each row's key: ``key`` maps the key columns to the dataset's encodings of them."""
    return row_identities(rows, key)


def load(destination: DatasetRoot, files: Sequence[str], shards: Sequence[Mapping[str, Any]]) -> LiveMap:
    """The live map: the entries of ``files`` whose shard is one of ``shards`` (the state's).

    Raises:
        LogDamagedError: a file declares more rows than the state has samples, or more bytes than such rows
            take (checked from its footer, before it is read), or more live entries than samples in all.
    """
    live = pa.array(sorted({shard_id(entry) for entry in shards}), pa.string())
    samples = sum(int(entry["samples"]) for entry in shards)
    parts, largest = [], 0
    for name in files:
        data = destination.read_bytes(name, destination.size(name) or 0)
        where = f"Key map file {destination.child(name)}"
        try:
            rows = pq.ParquetFile(io.BytesIO(data)).metadata.num_rows
            for group in bounded_row_groups(io.BytesIO(data), where, samples, GROUP_ROWS * ROW_BYTES):
                table = group.select(SCHEMA.names).cast(SCHEMA)
                parts.append(table.filter(pc.is_in(table["shard"], value_set=live)))
        except ParquetBoundsError as err:
            raise LogDamagedError(
                f"{err} The dataset holds {samples} samples, and a map file of this package never holds more "
                f"rows than that. {_REBUILD}"
            ) from None
        largest = max(largest, rows)
    entries = pa.concat_tables(parts) if parts else SCHEMA.empty_table()
    if entries.num_rows > samples:
        raise LogDamagedError(
            f"The key map of {destination.url} places {entries.num_rows} keys in shards that hold {samples} "
            f"samples. {_REBUILD}"
        )
    return LiveMap(entries, largest)


_REBUILD = "Rebuild the mirror: incremental_to_mds(table, new_out, mode='mirror', key=...)."


def write(destination: DatasetRoot, relative: str, entries: pa.Table) -> None:
    """Publish ``entries`` as the map file ``relative`` (a name no commit uses yet)."""
    sink = io.BytesIO()
    pq.write_table(entries.cast(SCHEMA), sink, compression="zstd", row_group_size=GROUP_ROWS)
    destination.write_bytes(relative, sink.getvalue())


def file_name(version: int, run: str) -> str:
    """The map file of the run bringing the dataset to table ``version``."""
    return f"{KEYS_FOLDER}/{version:020d}-{run}.parquet"


def entries(keys: Sequence[bytes], shard: str, samples: Sequence[int] | np.ndarray) -> pa.Table:
    """Map entries of one shard: ``keys[i]`` is at sample ``samples[i]``."""
    return pa.table(
        [pa.array(keys, pa.binary()), pa.array([shard] * len(keys), pa.string()), pa.array(samples, pa.int64())],
        schema=SCHEMA,
    )


def stored_keys(destination: DatasetRoot, shard: dict[str, Any], key: Mapping[str, str]) -> list[bytes]:
    """The key identity of every sample of a shard, read from its stored file (a shard this run wrote)."""
    return stored_identities(stored_data(destination, shard), shard, key)


def stored_data(destination: DatasetRoot, shard: dict[str, Any]) -> bytes:
    """A shard's raw (decompressed) bytes, read from its stored file."""
    stored = stored_file(shard)
    data = destination.read_bytes(stored["basename"], stored["bytes"])
    if shard.get("zip_data"):
        data = decompress(shard.get("compression"), data, max_size=shard[RAW_DATA]["bytes"])
    return data
