"""A dataset's version as a reader sees it in the index alone, so a training checkpoint can name it.

A dataset kept by ``incremental_to_mds`` changes under the training jobs that read it: an append adds shards, a
mirror run replaces shards with copies lacking the rows the table deleted or updated. A checkpoint's position
(``sample_in_epoch``) counts samples of one epoch's order, and that order is computed from the shard list, so a
position taken on one version points at other samples in the next. `dataset_version` gives such datasets a
fingerprint of their shard list (every shard's file name, bytes and samples, stream by stream), which changes
with every commit that adds, removes or replaces a shard (copy on write always writes new file names).

Datasets nothing keeps incrementally (MosaicML Streaming's, `MDSWriter`'s, a plain ``dataframe_to_mds``) have no
version: their checkpoints keep exactly upstream's keys. What lies in an incremental run's folder is told by
`streaming.format.runs`, which names those folders.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from streaming.format.index import RAW_DATA
from streaming.format.runs import increment_version
from streaming.format.table import ShardTable

#: Hex digits of the fingerprint: 64 bits, so that two versions of one dataset never share one by chance.
FINGERPRINT_DIGITS = 16


def dataset_version(tables: Sequence[ShardTable]) -> str | None:
    """The fingerprint of the streams' shard lists, or None when no stream holds a shard of an incremental run."""
    if not any(_has_increments(table) for table in tables):
        return None
    digest = hashlib.blake2b(digest_size=FINGERPRINT_DIGITS // 2)
    for number, table in enumerate(tables):
        column = table.files[RAW_DATA]
        names = column.names.tolist() if column is not None else [""] * len(table)
        digest.update(f"stream {number}: {len(table)} shards\n".encode())
        for name, size, samples in zip(names, table.raw_bytes.tolist(), table.samples.tolist()):
            digest.update(f"{name}\t{size}\t{samples}\n".encode())
    return digest.hexdigest()


def _has_increments(table: ShardTable) -> bool:
    column = table.files[RAW_DATA]
    return column is not None and any(increment_version(name) is not None for name in column.names.tolist())
