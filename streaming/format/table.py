"""`ShardTable`: a compact, columnar view of one ``index.json`` for datasets with very many shards.

Decoding goes straight from JSON bytes into typed records (msgspec), then into numpy arrays and one list
of file names per kind, so constructing a dataset over 100,000 shards takes a fraction of a second and a
few megabytes; `Reader` objects are built only for the shards a process actually touches.
"""

from __future__ import annotations

import gc
import json
import operator
import os
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
import numpy as np

from streaming.format.index import (
    FILE_KEYS,
    INDEX_VERSION,
    LINE_FORMATS,
    MAX_COUNT,
    MAX_INDEX_BYTES,
    MAX_SHARD_FILE_BYTES,
    RAW_DATA,
    RAW_META,
    SETTINGS_KEYS,
    ZIP_DATA,
    ZIP_META,
    check_capacity,
    check_file_name,
    check_format,
    check_version,
    min_sample_bytes,
)
from streaming.format.reader import Reader
from streaming.format.reader_registry import reader_from_json
from streaming.storage.local_tree import LocalTree

_RAW_NULL = msgspec.Raw(b"null")
_ALWAYS_PRESENT = ("compression", "size_limit")


#: Sizes and counts an index may state: non-negative and far below what int64 arithmetic can overflow.
_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]


class _File(msgspec.Struct, gc=False):
    basename: str
    bytes: _Count
    hashes: msgspec.Raw = msgspec.Raw(b"{}")


class _Shard(msgspec.Struct, gc=False):
    """One index entry; the settings stay undecoded (``Raw``) until they are known to be new."""

    samples: _Count
    raw_data: _File
    version: Any = None
    zip_data: _File | None = None
    raw_meta: _File | None = None
    zip_meta: _File | None = None
    format: msgspec.Raw = _RAW_NULL
    compression: msgspec.Raw = _RAW_NULL
    hashes: msgspec.Raw = msgspec.Raw(b"[]")
    size_limit: msgspec.Raw = _RAW_NULL
    column_encodings: msgspec.Raw = _RAW_NULL
    column_names: msgspec.Raw = _RAW_NULL
    column_sizes: msgspec.Raw = _RAW_NULL
    columns: msgspec.Raw = _RAW_NULL
    newline: msgspec.Raw = _RAW_NULL
    separator: msgspec.Raw = _RAW_NULL


class _Index(msgspec.Struct, gc=False):
    # Each entry is decoded on its own while the table is filled: 100,000 decoded entries at once would be
    # the largest transient of a dataset's construction (about 0.6 KiB each).
    shards: list[msgspec.Raw]
    version: Any = None


_decoder = msgspec.json.Decoder(_Index)
_shard_decoder = msgspec.json.Decoder(_Shard)
_settings = operator.attrgetter(*SETTINGS_KEYS)


def _shape(shard: _Shard, where: str, number: int) -> tuple[Any, Any]:
    """The ``format`` and ``column_sizes`` of a shard's settings, decoded (the format must be a name)."""
    shard_format = check_format(msgspec.json.decode(shard.format), where, number)
    return shard_format, msgspec.json.decode(shard.column_sizes)


def _check_capacities(
    samples: np.ndarray,
    raw_data: list[_File | None],
    raw_meta: list[_File | None],
    config_ids: np.ndarray,
    shapes: list[tuple[Any, Any]],
    where: str,
) -> None:
    """`check_capacity` for every shard at once (numpy): a count the files cannot hold is refused here, before
    any plan is sized by it. The first shard that fails is checked again by `check_capacity` for its message;
    a few shards are checked one by one (numpy's set-up costs more than that)."""
    count = len(samples)
    if count <= 16:
        for number in range(count):
            shard_format, column_sizes = shapes[config_ids[number]]
            record, meta_record = raw_data[number], raw_meta[number]
            meta_bytes = None if meta_record is None else meta_record.bytes
            data_bytes = record.bytes if record is not None else 0
            check_capacity(shard_format, column_sizes, int(samples[number]), data_bytes, meta_bytes, where, number)
        return
    data = np.fromiter((record.bytes for record in raw_data if record is not None), np.int64, count)
    meta = np.fromiter((0 if record is None else record.bytes for record in raw_meta), np.int64, count)
    has_meta = np.fromiter((record is not None for record in raw_meta), bool, count)
    lines = np.array([shard_format in LINE_FORMATS for shard_format, _ in shapes], bool)[config_ids] & has_meta
    least = np.array([min_sample_bytes(*shape) for shape in shapes], np.float64)[config_ids]
    table = 4.0 * (samples + 2)  # float64: exact far past any size that fits, and never overflows
    bad = (data > MAX_SHARD_FILE_BYTES) | (meta > MAX_SHARD_FILE_BYTES)
    bad |= np.where(lines, (table > meta) | (samples > data), table + samples * least > data)
    if bad.any():
        number = int(np.argmax(bad))
        shard_format, column_sizes = shapes[config_ids[number]]
        meta_bytes = int(meta[number]) if has_meta[number] else None
        check_capacity(shard_format, column_sizes, int(samples[number]), int(data[number]), meta_bytes, where, number)


def _decode_settings(raw: tuple[msgspec.Raw, ...]) -> dict[str, Any]:
    config = {"version": INDEX_VERSION}
    for name, value in zip(SETTINGS_KEYS, raw):
        decoded = msgspec.json.decode(value)
        if decoded is not None or name in _ALWAYS_PRESENT:
            config[name] = decoded
    return config


@dataclass
class FileColumn:
    """One kind of file (raw data, compressed data, raw meta, compressed meta) of every shard, as arrays.

    ``names`` is a numpy string array and ``hashes`` a numpy bytes array of the undecoded JSON digests; a shard
    without this kind of file has an empty name. No Python object exists per shard, so the table is shared
    copy-on-write by forked DataLoader workers instead of being copied into each.
    """

    names: np.ndarray
    sizes: np.ndarray
    hashes: np.ndarray

    @classmethod
    def from_records(cls, records: list[_File | None]) -> FileColumn | None:
        present = [record for record in records if record is not None]
        if not present:
            return None
        if len(present) == len(records):
            return cls(
                np.array([r.basename for r in present]),
                np.array([r.bytes for r in present], np.int64),
                np.array([bytes(r.hashes) for r in present]),
            )
        return cls(
            np.array([r.basename if r else "" for r in records]),
            np.array([r.bytes if r else 0 for r in records], np.int64),
            np.array([bytes(r.hashes) if r else b"{}" for r in records]),
        )

    def record(self, shard_id: int) -> dict[str, Any] | None:
        name = str(self.names[shard_id])
        if not name:
            return None
        return {
            "basename": name,
            "bytes": int(self.sizes[shard_id]),
            "hashes": msgspec.json.decode(self.hashes[shard_id]),
        }


@dataclass
class ShardTable:
    """All shards of one index: their shared settings, sizes and file records, by shard number.

    Attributes:
        samples: samples per shard (int64).
        raw_bytes: bytes of each shard's uncompressed files (int64).
        zip_bytes: bytes of each shard's compressed files, 0 when uncompressed (int64).
        config_ids: index into ``configs`` of each shard's settings (int32).
        configs: the distinct per-shard settings (everything but samples and file records).
        files: per file kind (``raw_data``, ``zip_data``, ``raw_meta``, ``zip_meta``), a `FileColumn`, or None
            when no shard has that kind of file.
    """

    samples: np.ndarray
    raw_bytes: np.ndarray
    zip_bytes: np.ndarray
    config_ids: np.ndarray
    configs: list[dict[str, Any]]
    files: dict[str, FileColumn | None]

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def num_samples(self) -> int:
        return int(self.samples.sum())

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> ShardTable:
        """Decode and validate index bytes; ``where`` (path or URL) is named in every error.

        The cyclic garbage collector is paused meanwhile: the records hold no cycles, and collections
        triggered by 100,000s of new objects would otherwise triple the time.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            return cls._decode(data, where)
        # In a part the first pass kept raw (a key of invalid UTF-8), or nesting deeper than msgspec decodes.
        except (msgspec.DecodeError, RecursionError) as err:
            raise json.JSONDecodeError(f"Index file at {where} is empty or corrupted: {err}", "", 0) from None
        finally:
            if enabled:
                gc.enable()

    @classmethod
    def _decode(cls, data: bytes, where: str) -> ShardTable:
        try:
            index = _decoder.decode(data)
        except msgspec.ValidationError as err:
            raise ValueError(f"Index file at {where} is not a valid streaming index: {err}") from None
        except msgspec.DecodeError as err:
            raise json.JSONDecodeError(f"Index file at {where} is empty or corrupted: {err}", "", 0) from None
        check_version(index.version, where)
        count = len(index.shards)
        samples = np.empty(count, np.int64)
        raw_bytes = np.zeros(count, np.int64)
        zip_bytes = np.zeros(count, np.int64)
        config_ids = np.empty(count, np.int32)
        configs: list[dict[str, Any]] = []
        distinct: list[tuple[msgspec.Raw, ...]] = []
        shapes: list[tuple[Any, Any]] = []  # per distinct settings: the format and column sizes, decoded
        files: dict[str, list[_File | None]] = {kind: [None] * count for kind in FILE_KEYS}
        raw_data, zip_data, raw_meta, zip_meta = (files[kind] for kind in FILE_KEYS)
        previous: tuple[msgspec.Raw, ...] | None = None
        config_id = -1
        for number, entry in enumerate(index.shards):
            try:
                shard = _shard_decoder.decode(entry)
            except msgspec.ValidationError as err:
                message = str(err)
                path = f"`$.shards[{number}]"
                where_in_index = message.replace("`$", path) if "`$" in message else f"{message} - at {path}`"
                raise ValueError(f"Index file at {where} is not a valid streaming index: {where_in_index}") from None
            if shard.version != INDEX_VERSION:
                check_version(shard.version, where, number)
            samples[number] = shard.samples
            raw_data[number] = raw = shard.raw_data
            check_file_name(raw.basename, where, number, RAW_DATA)
            raw_bytes[number] = raw.bytes
            if (record := shard.zip_data) is not None:
                zip_data[number] = record
                check_file_name(record.basename, where, number, ZIP_DATA)
                zip_bytes[number] = record.bytes
            if (record := shard.raw_meta) is not None:
                raw_meta[number] = record
                check_file_name(record.basename, where, number, RAW_META)
                raw_bytes[number] += record.bytes
            if (record := shard.zip_meta) is not None:
                zip_meta[number] = record
                check_file_name(record.basename, where, number, ZIP_META)
                zip_bytes[number] += record.bytes
            settings = _settings(shard)
            if settings != previous:
                previous = settings
                config_id = next((i for i, known in enumerate(distinct) if known == settings), len(distinct))
                if config_id == len(distinct):
                    distinct.append(settings)
                    shapes.append(_shape(shard, where, number))
            config_ids[number] = config_id
        _check_capacities(samples, raw_data, raw_meta, config_ids, shapes, where)
        configs = [_decode_settings(settings) for settings in distinct]
        columns = {kind: FileColumn.from_records(records) for kind, records in files.items()}
        return cls(samples, raw_bytes, zip_bytes, config_ids, configs, columns)

    @classmethod
    def from_file(cls, path: str, root: str | None = None) -> ShardTable:
        """Read the index at ``path``: a regular file (never a link, a FIFO or larger than `MAX_INDEX_BYTES`),
        reached from ``root`` (default: its own folder) without following a link below it."""
        root = os.path.dirname(path) if root is None else root
        relative = os.path.relpath(path, root).replace(os.sep, "/")
        return cls.from_bytes(LocalTree(root).read_bytes(relative, MAX_INDEX_BYTES), path)

    def entry(self, shard_id: int) -> dict[str, Any]:
        """The ``index.json`` entry of one shard, rebuilt."""
        entry = dict(self.configs[self.config_ids[shard_id]])
        entry["samples"] = int(self.samples[shard_id])
        for kind in FILE_KEYS:
            column = self.files[kind]
            entry[kind] = None if column is None else column.record(shard_id)
        return entry

    def reader(self, dirname: str, split: str | None, shard_id: int) -> Reader:
        """Build the reader of one shard."""
        return reader_from_json(dirname, split, self.entry(shard_id))

    def file_sizes(self, shard_id: int) -> list[tuple[str, int]]:
        """``(basename, bytes)`` of every file (raw and compressed) of one shard."""
        return [
            (str(column.names[shard_id]), int(column.sizes[shard_id]))
            for column in self.files.values()
            if column is not None and column.names[shard_id]
        ]

    def raw_names(self, shard_id: int) -> list[str]:
        """The uncompressed file names of one shard (data, and meta for split formats)."""
        names = (column.names[shard_id] for kind in (RAW_DATA, RAW_META) if (column := self.files[kind]) is not None)
        return [str(name) for name in names if name]
