"""Valid inputs for each fuzzing target: where the mutation fuzzer (`mutator`) starts, with the kept corpus.

Built once per process from our own writers and encoders, so a format change moves the seeds with it.
"""

from __future__ import annotations

import functools
import io
import json
import os
import tempfile
from decimal import Decimal
from typing import Any

import numpy as np
from PIL import Image

from streaming import CSVWriter, JSONWriter, MDSWriter
from streaming.format.mds.encodings import get_mds_coder

#: The columns of the shard-header target's reader (see `fuzz_targets.shard_header`).
SHARD_COLUMNS = {"c0": "int", "c1": "str"}


def _image() -> Image.Image:
    return Image.fromarray(np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3))


def _jpeg_bytes() -> bytes:
    out = io.BytesIO()
    _image().save(out, format="JPEG")
    return out.getvalue()


def _value(encoding: str) -> Any:
    """A typical value of ``encoding``."""
    images = {"pil", "png", "jpeg"}
    if encoding in images:
        return _image()
    if encoding.startswith("list["):
        return [_image(), _image()]
    if encoding in ("jpeg_array", "jpegarray"):
        return [_jpeg_bytes(), _jpeg_bytes()]
    values: dict[str, Any] = {
        "bytes": b"\x00seed\xff",
        "str": "s\u00e9ed/\u2603",
        "json": {"a": [1, "x", None, {"b": 2.5}]},
        "ndarray": np.arange(6, dtype=np.int32).reshape(2, 3),
        "str_decimal": Decimal("-12.50"),
        "str_float": -1.5e300,
        "str_int": -(2**70),
        "int": -(2**62),
    }
    if encoding in values:
        return values[encoding]
    return 7 if "int" in encoding else 1.5  # the fixed-size numeric scalars


@functools.cache
def decoder_seeds(encodings: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """One encoded value of each encoding."""
    return [(encoding, get_mds_coder(encoding).encode(_value(encoding))) for encoding in encodings]


def _written(writer: type, columns: dict[str, str], samples: list[dict[str, Any]], **kwargs: Any) -> dict[str, bytes]:
    """The files a writer produces for ``samples``, by basename."""
    with tempfile.TemporaryDirectory(prefix="mds-fuzz-seed-") as out:
        with writer(out=out, columns=columns, **kwargs) as sink:
            for sample in samples:
                sink.write(sample)
        files = {}
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name), "rb") as f:
                files[name] = f.read()
        return files


_SAMPLES = [{"c0": -1, "c1": "a"}, {"c0": 2**40, "c1": ""}, {"c0": 0, "c1": "\u00e9\u00e9"}]


@functools.cache
def index_seeds() -> list[bytes]:
    """``index.json`` files of each format: MDS plain, MDS zstd with hashes and a small size limit, JSON, CSV."""
    indexes = [
        _written(MDSWriter, SHARD_COLUMNS, _SAMPLES)["index.json"],
        _written(MDSWriter, SHARD_COLUMNS, _SAMPLES, compression="zstd", hashes=["sha1", "xxh64"], size_limit=64)[
            "index.json"
        ],
        _written(JSONWriter, SHARD_COLUMNS, _SAMPLES)["index.json"],
        _written(CSVWriter, SHARD_COLUMNS, _SAMPLES)["index.json"],
    ]
    return [json.dumps(json.loads(text)).encode() for text in indexes]


@functools.cache
def shard_seeds() -> list[tuple[int, bytes]]:
    """MDS shard files of `SHARD_COLUMNS` with 0, 1 and 3 samples, with their sample counts."""
    seeds = []
    for count in (1, 3):
        files = _written(MDSWriter, SHARD_COLUMNS, _SAMPLES[:count])
        seeds.append((count, files["shard.00000.mds"]))
    seeds.append((0, (0).to_bytes(4, "little") * 2))
    return seeds


@functools.cache
def commit_seeds() -> list[tuple[int, bytes]]:
    """Commit files our commit writes (an append with a conversion record, an overwrite, then a mirror run's
    replace with its audit and key-map files), with versions."""
    from streaming.format import commit_log
    from streaming.storage.dataset_root import DatasetRoot

    shards = [json.loads(text)["shards"] for text in index_seeds()]
    record = {"run": "20240101T000000Z-abcdef", "mode": "append", "source": {"name": "t", "version": 3}}
    seeds = []
    with tempfile.TemporaryDirectory(prefix="mds-fuzz-seed-") as out:
        root = DatasetRoot(out)
        state = commit_log.commit(root, commit_log.APPEND, shards[0], base=commit_log.Snapshot(0), record=record)
        state = commit_log.commit(root, commit_log.OVERWRITE, shards[1], base=state, record=record)
        mirrored = {**record, "mode": "mirror", "key": ["id"], "files": ["_mds_keys/00000000000000000003-r.parquet"]}
        audit = {"table": "t", "table_version": 3, "key": ["id"], "removed": ["ab" * 16], "replaced": ["cd" * 16]}
        removed = [shards[1][0]["raw_data"]["basename"]]
        commit_log.commit(
            root, commit_log.REPLACE, shards[0], base=state, record=mirrored, removed=removed, audit=audit
        )
        for version in (1, 2, 3):
            with open(os.path.join(out, commit_log.commit_path(version)), "rb") as f:
                seeds.append((version, f.read()))
    return seeds


@functools.cache
def record_seeds() -> list[bytes]:
    """Conversion records (``mds_conversion.json``) of the states the commits above lead to."""
    from streaming.format import commit_log

    state, records = commit_log.Snapshot(0, logged=True), []
    for _, data in commit_seeds():
        state = commit_log._apply(state, json.loads(data))
        records.append(json.dumps(state.metadata).encode())
    return records


@functools.cache
def checkpoint_seeds() -> list[tuple[int, bytes]]:
    """Checkpoint bodies (before gzip) of the states the commits above lead to, as `write_log_checkpoint` writes."""
    from streaming.format import commit_log

    state, seeds = commit_log.Snapshot(0, logged=True), []
    for version, data in commit_seeds():
        state = commit_log._apply(state, json.loads(data))
        body = {
            "log_format": commit_log.LOG_FORMAT,
            "version": version,
            "shards": state.shards,
            "metadata": state.metadata,
            "source_versions": {"t": 3},
        }
        seeds.append((version, json.dumps(body, sort_keys=True).encode()))
    return seeds


@functools.cache
def vector_seeds() -> list[tuple[int, int, bytes]]:
    """Valid Delta deletion vectors as ``(rows in the file, cardinality, bytes)``: the magic number, then a portable
    64-bit RoaringBitmap (array, bitmap and run containers, and a second 32-bit bucket)."""
    import struct

    import pyroaring

    from streaming.delta.deletion_vectors import MAGIC

    sets = [[], [0], [1, 5, 9], list(range(0, 9000, 2)), list(range(100, 70000)), [3, 2**32 + 7]]
    seeds = []
    for positions in sets:
        bitmap = pyroaring.BitMap64(positions)
        bitmap.run_optimize()
        rows = (max(positions) + 1) if positions else 1
        seeds.append((rows, len(positions), struct.pack("<I", MAGIC) + bitmap.serialize()))
    return seeds
