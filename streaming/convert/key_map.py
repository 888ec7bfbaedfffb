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
need no rewriting of older files. Once a map has more than `MAX_FILES` files, the run writes the whole live map
as one file instead (compaction), so a run reads at most `MAX_FILES` files. A run reads the whole map (about
17 bytes a row in Parquet: digests do not compress): small next to the shards of any real dataset, and it also
proves every new key unique in the table.

The identity is a digest, not the key's value, so the map and the audit (a mirror commit's ``audit``) name no key
in clear. It is a pseudonym, not anonymity: whoever has a key's value (or can enumerate a small key space) can
compute its digest, which is also how a user shows that a given key was removed (`key_digests`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streaming.convert.row_identity import row_identities, stored_identities
from streaming.format.commit_log import Snapshot
from streaming.format.compression import decompress
from streaming.format.index import RAW_DATA, stored_file
from streaming.storage.dataset_root import DatasetRoot

KEYS_FOLDER = "_mds_keys"
#: A map of more files than this is compacted into one by the run that would add the next.
MAX_FILES = 16
#: The ``mode`` a mirror run records in its run record.
MIRROR = "mirror"
SCHEMA = pa.schema([("key", pa.binary()), ("shard", pa.string()), ("sample", pa.int64())])


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


def load(destination: DatasetRoot, files: Sequence[str], shards: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The live map: the entries of ``files`` whose shard is one of ``shards`` (the state's)."""
    live = pa.array(sorted({shard_id(entry) for entry in shards}), pa.string())
    parts = []
    for name in files:
        data = destination.read_bytes(name, destination.size(name) or 0)
        table = pq.read_table(io.BytesIO(data), schema=SCHEMA)
        parts.append(table.filter(pc.is_in(table["shard"], value_set=live)))
    return pa.concat_tables(parts) if parts else SCHEMA.empty_table()


def write(destination: DatasetRoot, relative: str, entries: pa.Table) -> None:
    """Publish ``entries`` as the map file ``relative`` (a name no commit uses yet)."""
    sink = io.BytesIO()
    pq.write_table(entries.cast(SCHEMA), sink, compression="zstd")
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
