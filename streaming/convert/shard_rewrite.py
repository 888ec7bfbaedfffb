"""Copy on write of one MDS shard: the same samples but some, under a new file name, byte for byte.

A mirror run (`streaming.incremental.mirror`) removes rows from the shards that hold them without touching any other
shard. The kept samples are copied as their stored bytes (no decoding, no re-encoding), so the new shard has the
old one's columns, encodings, NULL masks, compression and header (the writer's settings, `docs/formats/mds.md`),
and every sample in it reads exactly as before; only the sample count, the offsets and the file's digests change.
The new file gets a new name: a reader of the older index still finds the old file, which stays until
``vacuum``'s retention (the commit that replaces it names it in ``remove``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from streaming.format.compression import compress, decompress, get_compression_extension
from streaming.format.hashing import get_hash
from streaming.format.index import RAW_DATA, ZIP_DATA, stored_file
from streaming.storage.dataset_root import DatasetRoot


@dataclass(frozen=True)
class Rewritten:
    """One shard's copy without some samples.

    Attributes:
        entry: the new shard's index entry, or None when no sample is left (the shard is only removed).
        kept: the old sample index of each sample of the new shard, in order.
        bytes_read: bytes of the stored file read.
        bytes_written: bytes of the stored file written (0 when none was).
    """

    entry: dict[str, Any] | None
    kept: list[int]
    bytes_read: int
    bytes_written: int


def rewrite_without(
    destination: DatasetRoot,
    shard: dict[str, Any],
    dropped: Collection[int],
    basename: str,
    check: Callable[[bytes], None] | None = None,
) -> Rewritten:
    """Write ``shard`` without the samples ``dropped`` as ``basename`` (root-relative, its raw name; the stored
    file adds the compression's extension) and return its new entry. ``check`` sees the shard's decompressed bytes
    before anything is written (to verify that ``dropped`` are the samples meant)."""
    if shard.get("format") != "mds":
        raise ValueError(
            f"Shard {stored_file(shard)['basename']} is a {shard.get('format')!r} shard; a mirror run rewrites "
            f"MDS shards only."
        )
    stored = stored_file(shard)
    data = destination.read_bytes(stored["basename"], stored["bytes"])
    compression = shard.get("compression") if shard.get(ZIP_DATA) else None
    raw = decompress(compression, data, max_size=shard[RAW_DATA]["bytes"]) if compression else data
    count = int.from_bytes(raw[:4], "little")
    if count != shard["samples"]:
        raise ValueError(
            f"Shard {stored['basename']} holds {count} samples but the index says {shard['samples']}; "
            f"it is not rewritten (run `streaming.cli verify` on the dataset)."
        )
    if check is not None:
        check(raw)
    drop = set(dropped)
    kept = [index for index in range(count) if index not in drop]
    if not kept:
        return Rewritten(None, [], len(data), 0)
    offsets = np.frombuffer(raw, "<u4", count + 1, 4).astype(np.int64)
    # Between the offsets and the first sample lies the writer's settings (JSON): kept as they are.
    settings = raw[4 + 4 * (count + 1) : int(offsets[0])]
    first = 4 + 4 * (len(kept) + 1) + len(settings)
    lengths = offsets[1:][kept] - offsets[:-1][kept]
    new_offsets = first + np.concatenate([[0], np.cumsum(lengths)])
    starts, stops = offsets[:-1].tolist(), offsets[1:].tolist()
    body = b"".join(raw[starts[index] : stops[index]] for index in kept)
    new_raw = struct.pack("<I", len(kept)) + new_offsets.astype("<u4").tobytes() + settings + body
    entry = {**shard, "samples": len(kept)}
    entry[RAW_DATA] = _file(basename, new_raw, shard[RAW_DATA])
    written = new_raw
    if compression:
        written = compress(compression, new_raw)
        entry[ZIP_DATA] = _file(f"{basename}.{get_compression_extension(compression)}", written, shard[ZIP_DATA])
    destination.write_bytes(stored_file(entry)["basename"], written)
    return Rewritten(entry, kept, len(data), len(written))


def _file(basename: str, data: bytes, old: dict[str, Any]) -> dict[str, Any]:
    """A file record with the same kinds of digest as the record it replaces."""
    digests = {algo: get_hash(algo, data) for algo in old.get("hashes") or {}}
    return {"basename": basename, "bytes": len(data), "hashes": digests}
