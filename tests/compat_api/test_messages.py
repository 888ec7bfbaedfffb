"""Errors and warnings begin with streaming-community 0.14.2's words, with its exception and warning types.

Code written against the reference catches its exception types and matches the leading words of
its messages (``pytest.raises(match=...)``); ours may say more after them (the column, file or
fix). Each row below is one raise or warning of the reference (module, type, first words, copied
from its source listing), triggered through our public API. ``warns`` rows are Python warnings
(the reference's ``warnings.warn``), ``logs`` rows are log records (its ``logger.warning``).

Rows of the reference that are deliberately not checked, and why, are in ``NOT_CHECKED``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streaming import CSVWriter, JSONWriter, LocalDataset, MDSWriter, Stream, StreamingDataset
from streaming.base.compression import compress, decompress, get_compression_extension
from streaming.base.format.mds.encodings import get_mds_encoded_size, mds_decode, mds_encode
from streaming.base.hashing import get_hash
from streaming.base.registry_utils import import_file
from streaming.base.sampling import get_sampling
from streaming.base.world import World
from streaming.dataset.dataloader import batch_length
from streaming.text import StreamingC4, StreamingPile
from streaming.vision.base import StreamingVisionDataset


@dataclass(frozen=True)
class Row:
    """One raise or warning of the reference: where it is, its type, how it begins, how to trigger it."""

    module: str
    kind: str  # "raises", "warns" or "logs"
    category: type[BaseException]  # the exception or warning class (``logs``: unused, Warning)
    begins: str  # the reference's first words; "{}" stands for a value filled in at run time
    trigger: Callable[[Path], Any]


def _pattern(begins: str) -> str:
    """A regex anchored at the start: the words literally, each ``{}`` any run-time value.

    A final period is left out: ours may add to the last sentence (``Received -1 (epoch_size=-1).``).
    """
    return "^" + ".+?".join(re.escape(part) for part in begins.removesuffix(".").split("{}"))


def _dataset(path: Path, count: int = 10, columns: dict[str, str] | None = None, **kwargs: Any) -> str:
    out = str(path)
    with MDSWriter(out=out, columns=columns or {"id": "int"}, **kwargs) as writer:
        for i in range(count):
            writer.write({"id": i})
    return out


def _rewrite_index(path: str, change: Callable[[dict[str, Any]], None]) -> None:
    index_path = os.path.join(path, "index.json")
    with open(index_path) as f:
        index = json.load(f)
    change(index)
    with open(index_path, "w") as f:
        json.dump(index, f)


def _local(tmp: Path, **kwargs: Any) -> StreamingDataset:
    return StreamingDataset(local=_dataset(tmp / "ds"), batch_size=kwargs.pop("batch_size", 2), **kwargs)


def _write_one(tmp: Path, columns: dict[str, str], sample: dict[str, Any], writer: type = MDSWriter) -> None:
    with writer(out=str(tmp / "w"), columns=columns) as w:
        w.write(sample)


def _version_3(tmp: Path) -> Any:
    path = _dataset(tmp / "ds")
    _rewrite_index(path, lambda index: index.update(version=3))
    return LocalDataset(path)


def _shard_version_3(tmp: Path) -> Any:
    path = _dataset(tmp / "ds")
    _rewrite_index(path, lambda index: index["shards"][0].update(version=3))
    return StreamingDataset(local=path, batch_size=2)


def _text(tmp: Path) -> str:
    out = str(tmp / "text")
    with MDSWriter(out=out, columns={"text": "str"}) as writer:
        writer.write({"text": "a sample"})
    return out


def _empty_stream(tmp: Path) -> Any:
    path = str(tmp / "empty")
    with MDSWriter(out=path, columns={"id": "int"}):
        pass
    return StreamingDataset(local=path, batch_size=2)


def _unsorted_hashes(tmp: Path) -> Any:
    return MDSWriter(out=str(tmp / "w"), columns={"id": "int"}, hashes=["sha1", "md5"])


def _validate_hash_missing(tmp: Path) -> Any:
    remote = _dataset(tmp / "remote", hashes=["sha1"])
    return StreamingDataset(remote=remote, local=str(tmp / "cache"), validate_hash="xxh64", batch_size=2)[0]


def _checksum_failure(tmp: Path) -> Any:
    remote = _dataset(tmp / "remote", hashes=["sha1"])
    shard = os.path.join(remote, "shard.00000.mds")
    with open(shard, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    return StreamingDataset(
        remote=remote, local=str(tmp / "cache"), validate_hash="sha1", download_retry=1, batch_size=2
    )[0]


def _not_empty(tmp: Path) -> Any:
    os.makedirs(tmp / "w")
    (tmp / "w" / "keep.txt").write_text("x")
    return MDSWriter(out=str(tmp / "w"), columns={"id": "int"})


def _cache_below_index(tmp: Path) -> Any:
    remote = _dataset(tmp / "remote")
    return StreamingDataset(remote=remote, local=str(tmp / "cache"), cache_limit=10, batch_size=2)


def _cache_below_four_shards(tmp: Path) -> Any:
    remote = _dataset(tmp / "remote", count=2000, size_limit=1 << 12)
    index_bytes = os.path.getsize(os.path.join(remote, "index.json"))
    return StreamingDataset(remote=remote, local=str(tmp / "cache"), cache_limit=index_bytes + 100, batch_size=2)


def _two_streams_one_local(tmp: Path) -> Any:
    path = _dataset(tmp / "ds")
    return StreamingDataset(streams=[Stream(local=path), Stream(local=path)], batch_size=2)


def _mixed_weights(tmp: Path) -> Any:
    a, b = _dataset(tmp / "a"), _dataset(tmp / "b")
    return StreamingDataset(streams=[Stream(local=a, proportion=0.5), Stream(local=b, repeat=1)], batch_size=2)


ROWS: dict[str, Row] = {
    # streaming.base.dataset
    "streams_and_remote": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "You must provide either `streams` or `remote`/`local`, but not both.",
        lambda tmp: StreamingDataset(streams=[Stream(local=_dataset(tmp / "a"))], local=str(tmp / "b")),
    ),
    "sampling_method": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "Invalid sampling method: bogus. Must be one of `balanced`",
        lambda tmp: _local(tmp, sampling_method="bogus"),
    ),
    "sampling_granularity": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "`sampling_granularity` must be a positive integer, but got: 0.",
        lambda tmp: _local(tmp, sampling_granularity=0),
    ),
    "batching_method": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "Invalid batching method: bogus. Must be one of `random`,",
        lambda tmp: _local(tmp, batching_method="bogus"),
    ),
    "shuffle_seed": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "`shuffle_seed` must be a non-negative integer, but got: -1.",
        lambda tmp: _local(tmp, shuffle_seed=-1),
    ),
    "predownload_below_batch_size": Row(
        "streaming.base.dataset",
        "warns",
        UserWarning,
        "predownload < batch_size (1 < 4).",
        lambda tmp: _local(tmp, batch_size=4, predownload=1),
    ),
    "epoch_size_negative": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "Epoch size cannot be negative. Received -1.",
        lambda tmp: _local(tmp, epoch_size=-1),
    ),
    "stream_without_samples": Row(
        "streaming.base.dataset", "raises", RuntimeError, "Stream contains no samples: {}index.json.", _empty_stream
    ),
    "batch_size_missing": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "Please pass `batch_size` to StreamingDataset. It should be set",
        lambda tmp: next(iter(StreamingDataset(local=_dataset(tmp / "ds")))),
    ),
    "cache_below_index": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "Minimum cache usage ({} bytes) is larger than the cache limit (10 bytes).",
        _cache_below_index,
    ),
    "cache_below_four_shards": Row(
        "streaming.base.dataset",
        "raises",
        ValueError,
        "Cache limit ({} bytes) is too low. Increase the",
        _cache_below_four_shards,
    ),
    "sample_index_out_of_range": Row(
        "streaming.base.spanner",
        "raises",
        IndexError,
        "Invalid sample index `10`: 0 <= 10 < 10",
        lambda tmp: _local(tmp)[10],
    ),
    "getitem_argument_type": Row(
        "streaming.base.array",
        "raises",
        ValueError,
        "Unsupported argument type passed to __getitem__: {}.",
        lambda tmp: LocalDataset(_dataset(tmp / "ds"))[{"a": 1}],
    ),
    "reused_local": Row(
        "streaming.base.shared.prefix",
        "raises",
        ValueError,
        "Reused local directory: {}. Provide a different one.",
        _two_streams_one_local,
    ),
    # streaming.base.stream
    "stream_two_weights": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "At most one of `proportion`, `repeat`, and `choose` may",
        lambda tmp: Stream(local=str(tmp), proportion=0.5, repeat=2),
    ),
    "stream_proportion_negative": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "`proportion` must be non-negative",
        lambda tmp: Stream(local=str(tmp), proportion=-1),
    ),
    "stream_repeat_negative": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "`repeat` must be non-negative",
        lambda tmp: Stream(local=str(tmp), repeat=-1),
    ),
    "stream_choose_negative": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "`choose` must be non-negative",
        lambda tmp: Stream(local=str(tmp), choose=-1),
    ),
    "stream_download_retry": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "`download_retry` must be non-negative",
        lambda tmp: Stream(local=str(tmp), download_retry=-1),
    ),
    "stream_download_timeout": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "`download_timeout` must be positive",
        lambda tmp: Stream(local=str(tmp), download_timeout=0),
    ),
    "stream_without_paths": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "`remote` and/or `local` path must be provided",
        # The reference fails before its check here (it creates a temporary local directory first).
        lambda tmp: StreamingDataset(streams=[Stream()], batch_size=2),
    ),
    "stream_mixed_weights": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "Relative (`proportion`) and absolute (`repeat`, `choose`, none) stream weights",
        _mixed_weights,
    ),
    "stream_index_version": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "Unsupported streaming data version: 3. Expected version 2.",
        _shard_version_3,  # the reference checks a shard entry's version with an assert
    ),
    "validate_hash_not_in_index": Row(
        "streaming.base.stream",
        "raises",
        ValueError,
        "Hash algorithm `xxh64` chosen for data validation does not",
        _validate_hash_missing,
    ),
    "checksum_failure": Row("streaming.base.stream", "raises", ValueError, "Checksum failure: ", _checksum_failure),
    "no_remote_no_local_index": Row(
        "streaming.base.stream",
        "raises",
        RuntimeError,
        "No `remote` provided, but local file {}index.json does not",
        lambda tmp: StreamingDataset(local=str(tmp / "missing"), batch_size=2),
    ),
    # streaming.base.local
    "local_index_version": Row(
        "streaming.base.local",
        "raises",
        ValueError,
        "Unsupported streaming data version: 3. Expected version 2.",
        _version_3,
    ),
    # streaming.base.sampling, streaming.base.world, streaming.base.dataloader
    "sampling_granularity_arg": Row(
        "streaming.base.sampling",
        "raises",
        ValueError,
        "`granularity` must be a positive integer, but got: 0.",
        lambda tmp: get_sampling(np.array([4]), 2, 0, 0, 0, True),
    ),
    "replication_positive": Row(
        "streaming.base.world",
        "raises",
        ValueError,
        "Replication factor must be positive.",
        lambda tmp: World.detect().replicate(0),
    ),
    "replication_divides_world": Row(
        "streaming.base.world",
        "raises",
        ValueError,
        "World size must be divisible by your replication factor.",
        lambda tmp: World.detect().replicate(3),
    ),
    "dataloader_empty_batch": Row(
        "streaming.base.dataloader",
        "raises",
        ValueError,
        "Batch is empty",
        lambda tmp: batch_length({}),
    ),
    # streaming.base.compression, streaming.base.hashing
    "compress_unknown": Row(
        "streaming.base.compression",
        "raises",
        ValueError,
        "bogus is not a supported compression algorithm.",
        lambda tmp: compress("bogus", b"data"),
    ),
    "decompress_unknown": Row(
        "streaming.base.compression",
        "raises",
        ValueError,
        "bogus is not a supported compression algorithm.",
        lambda tmp: decompress("bogus", b"data"),
    ),
    "compression_extension_unknown": Row(
        "streaming.base.compression",
        "raises",
        ValueError,
        "bogus is not a supported compression algorithm.",
        lambda tmp: get_compression_extension("bogus"),
    ),
    "hash_unknown": Row(
        "streaming.base.hashing",
        "raises",
        ValueError,
        "bogus is not a supported hash algorithm.",
        lambda tmp: get_hash("bogus", b"data"),
    ),
    # streaming.base.format.base.writer, streaming.base.storage.upload
    "writer_hashes_unsorted": Row(
        "streaming.base.format.base.writer",
        "raises",
        ValueError,
        "Hashes must be unique and in sorted order.",
        _unsorted_hashes,
    ),
    "writer_argument": Row(
        "streaming.base.format.base.writer",
        "raises",
        ValueError,
        "Invalid Writer argument(s): ['bogus']",
        lambda tmp: MDSWriter(out=str(tmp / "w"), columns={"id": "int"}, bogus=1),
    ),
    "writer_compression": Row(
        "streaming.base.format.base.writer",
        "raises",
        ValueError,
        "Invalid compression: bogus.",
        lambda tmp: MDSWriter(out=str(tmp / "w"), columns={"id": "int"}, compression="bogus"),
    ),
    "writer_hash": Row(
        "streaming.base.format.base.writer",
        "raises",
        ValueError,
        "Invalid hash: bogus.",
        lambda tmp: MDSWriter(out=str(tmp / "w"), columns={"id": "int"}, hashes=["bogus"]),
    ),
    "writer_size_limit_zero": Row(
        "streaming.base.format.base.writer",
        "raises",
        ValueError,
        "`size_limit` must be greater than zero, instead, found as -1.",
        lambda tmp: MDSWriter(out=str(tmp / "w"), columns={"id": "int"}, size_limit=-1),
    ),
    "writer_size_limit_4gib": Row(
        "streaming.base.format.base.writer",
        "raises",
        ValueError,
        "`size_limit` must be less than 2**32, instead, found as 4294967296.",
        lambda tmp: MDSWriter(out=str(tmp / "w"), columns={"id": "int"}, size_limit=2**32),
    ),
    "writer_directory_not_empty": Row(
        "streaming.base.storage.upload", "raises", FileExistsError, "Directory is not empty: ", _not_empty
    ),
    # streaming.base.format.mds.writer / encodings
    "mds_writer_encoding": Row(
        "streaming.base.format.mds.writer",
        "raises",
        TypeError,
        "MDSWriter passed column `x` with encoding `bogus` is unsupported.",
        lambda tmp: MDSWriter(out=str(tmp / "w"), columns={"x": "bogus"}),
    ),
    "mds_unsupported_encoding_size": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        ValueError,
        "Unsupported encoding: bogus.",
        lambda tmp: get_mds_encoded_size("bogus"),
    ),
    "mds_unsupported_encoding_encode": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        ValueError,
        "Unsupported encoding: bogus.",
        lambda tmp: mds_encode("bogus", 1),
    ),
    "mds_unsupported_encoding_decode": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        ValueError,
        "Unsupported encoding: bogus.",
        lambda tmp: mds_decode("bogus", b"1"),
    ),
    "mds_data_type": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        AttributeError,
        "data should be of type {}, but instead, found",
        lambda tmp: _write_one(tmp, {"x": "str"}, {"x": 5}),
    ),
    "ndarray_scalar": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        ValueError,
        "Attempting to encode a scalar with NDArray encoding.",
        lambda tmp: _write_one(tmp, {"x": "ndarray"}, {"x": np.array(5)}),
    ),
    "ndarray_no_elements": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        ValueError,
        "Attempting to encode a numpy array with 0 elements.",
        lambda tmp: _write_one(tmp, {"x": "ndarray:int32"}, {"x": np.zeros(0, np.int32)}),
    ),
    "ndarray_dtype": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        ValueError,
        "Wrong dtype: expected int32, got float64.",
        lambda tmp: _write_one(tmp, {"x": "ndarray:int32"}, {"x": np.zeros(3)}),
    ),
    "ndarray_shape": Row(
        "streaming.base.format.mds.encodings",
        "raises",
        ValueError,
        "Wrong shape: expected (2, 2), got (3,).",
        lambda tmp: _write_one(tmp, {"x": "ndarray:int32:2,2"}, {"x": np.zeros(3, np.int32)}),
    ),
    "xsv_data_type": Row(
        "streaming.base.format.xsv.encodings",
        "raises",
        AttributeError,
        "data should be of type {}, but instead, found",
        lambda tmp: _write_one(tmp, {"x": "int"}, {"x": "five"}, CSVWriter),
    ),
    "json_data_type": Row(
        "streaming.base.format.json.encodings",
        "raises",
        AttributeError,
        "data should be of type {}, but instead, found",
        lambda tmp: _write_one(tmp, {"x": "int"}, {"x": "five"}, JSONWriter),
    ),
    # streaming.base.format.mds.reader, json.reader
    "mds_unsafe_type": Row(
        "streaming.base.format.mds.reader",
        "raises",
        ValueError,
        "Column x contains an unsafe type: pkl. To proceed",
        lambda tmp: (
            _write_one(tmp, {"x": "pkl"}, {"x": [1]}),
            StreamingDataset(local=str(tmp / "w"), batch_size=2),
        ),
    ),
    # streaming.base.partition (through generate_work; the plans themselves are in tests/order)
    "partition_node_ratio": Row(
        "streaming.base.partition.orig",
        "raises",
        ValueError,
        "Either canonical or physical nodes must be evenly divisible",
        lambda tmp: __import__("streaming.base.partition", fromlist=["x"]).get_partitions("orig", 100, 3, 2, 1, 1, 1),
    ),
    "partition_few_samples": Row(
        "streaming.base.partition.orig",
        "warns",
        UserWarning,
        "Trying to partition 3 samples over 8 canonical nodes.",
        lambda tmp: __import__("streaming.base.partition", fromlist=["x"]).get_partitions("orig", 3, 8, 1, 1, 1, 1),
    ),
    "partition_drop_first": Row(
        "streaming.base.partition.orig",
        "logs",
        Warning,
        "`drop_first` was not divisible by `num_physical_nodes`. Rounding it down",
        lambda tmp: __import__("streaming.base.partition", fromlist=["x"]).get_partitions(
            "orig", 100, 2, 2, 1, 1, 1, 3
        ),
    ),
    "resume_past_the_end": Row(
        "streaming.base.partition.__init__",
        "raises",
        ValueError,
        "Resuming further into the dataset (200) than it has",
        lambda tmp: __import__("streaming.base.partition", fromlist=["x"]).get_partitions(
            "orig", 100, 1, 1, 1, 1, 1, 200
        ),
    ),
    "shuffle_block_smaller_than_shard": Row(
        "streaming.base.shuffle.py1e",
        "warns",
        UserWarning,
        "Shuffle block size was smaller than shard size for some shards.",
        lambda tmp: __import__("streaming.base.shuffle", fromlist=["x"]).get_shuffle(
            "py1e", np.array([100, 100]), 1, 0, 0, 10
        ),
    ),
    # the dataset zoo
    "c4_group_method": Row(
        "streaming.text.c4",
        "raises",
        ValueError,
        "group_method='concat' must be one of ",
        lambda tmp: StreamingC4(
            local=_text(tmp), tokenizer_name="gpt2", max_seq_len=8, group_method="concat", batch_size=2
        ),
    ),
    "pile_group_method": Row(
        "streaming.text.pile",
        "raises",
        ValueError,
        'Only group_method="truncate" is supported at this time.',
        lambda tmp: StreamingPile(
            local=_text(tmp), tokenizer_name="gpt2", max_seq_len=8, group_method="concat", batch_size=2
        ),
    ),
    "vision_transforms": Row(
        "streaming.vision.base",
        "raises",
        ValueError,
        "Only transforms or transform/target_transform can be passed as an",
        lambda tmp: StreamingVisionDataset(local=_dataset(tmp / "ds"), transforms=print, transform=print, batch_size=2),
    ),
    # streaming.base.registry_utils
    "import_file_missing": Row(
        "streaming.base.registry_utils",
        "raises",
        FileNotFoundError,
        "File {} does not exist.",
        lambda tmp: import_file(str(tmp / "missing.py")),
    ),
}

# Rows of the reference's listing that name no feature we have, or that we do differently on purpose.
NOT_CHECKED: dict[str, str] = {
    "streaming.base.shared.prefix: _SharedMemoryNotReady / Internal error: shared memory ...": (
        "no numbered /dev/shm prefixes: coordination is file-lock based (docs/guide/reading.md, 'Processes of a node')"
    ),
    "streaming.base.shared.prefix: Reused local directory: {} vs {}. Provide a different": (
        "docs/guide/reading.md: datasets of the same remote may share one `local`; a different remote raises "
        "'Reused local directory: ...' (checked in tests/dataset)"
    ),
    "streaming.base.shared.prefix: Specify at least zero retries": "no shared-memory registration retries",
    "streaming.base.dataset: background thread failed / Invalid shard state / Invalid _IterState": (
        "no background prepare thread or _IterState: workers download on demand"
    ),
    "streaming.base.dataset: Negative cache usage / StreamingDataset repeatedly failed to download": (
        "cache accounting is per-shard reservations (cannot go negative); download failures surface as the "
        "storage error itself (guide: never masked)"
    ),
    "streaming.base.dataset: The StreamingDataset state dict for resumption is currently": (
        "state dicts of any epoch are accepted; a stale one warns (docs/guide/resumption.md)"
    ),
    "streaming.base.dataset: Sample IDs must be of {}D shape": "the epoch plan is never shared as raw shm",
    "streaming.base.format.base.writer: One of the threads failed / Internal error": (
        "the first upload error itself is raised (guide: a storage error surfaces as itself)"
    ),
    "streaming.base.format.mds.writer: KeyError Unexpected data size": "fixed sizes are checked per column",
    "streaming.base.format.mds.encodings: JPEGArray/JPEG list messages": "not triggered here (format tests)",
    "streaming.base.storage.download / upload": (
        "storage rows are not checked by this table yet (storage is the security helper's area this round)"
    ),
    "streaming.base.util": "not checked by this table yet",
    "streaming.text.c4: Got unknown group_method": "unreachable: the constructor refuses other methods first",
    "streaming.base.registry_utils: Namespace already exists": (
        "as upstream, raised when catalogue already has the bare namespace; no public call of either package "
        "reaches it (a registry's entries live under namespace + name)"
    ),
    "streaming.base.stream: Only provide `choose` when weighting streams relatively": (
        "epoch_size with unweighted streams is accepted (upstream's check is unreachable from StreamingDataset)"
    ),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_message_begins_with_upstream_words(name, tmp_path, caplog):
    row = ROWS[name]
    pattern = _pattern(row.begins)
    if row.kind == "raises":
        with pytest.raises(row.category, match=pattern):
            row.trigger(tmp_path)
    elif row.kind == "warns":
        with pytest.warns(row.category, match=pattern):  # type: ignore[arg-type]
            row.trigger(tmp_path)
    else:
        caplog.set_level(logging.WARNING, logger="streaming")
        row.trigger(tmp_path)
        messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(re.match(pattern, m) for m in messages), messages


def test_every_row_names_a_module_of_the_reference():
    for row in ROWS.values():
        assert row.module.startswith("streaming.") and row.kind in ("raises", "warns", "logs")
