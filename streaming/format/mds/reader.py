"""`MDSReader`: zero-copy random access to the samples of one memory-mapped MDS shard."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from streaming.format.columns import Columns
from streaming.format.errors import ShardCorruptError
from streaming.format.mds.encodings import ValueDecoder, get_mds_coder, is_mds_encoding_safe, value_decoder
from streaming.format.mds.gather import Segment, ShardGather, ShardView, shard_gather
from streaming.format.mds.nulls import fold_nulls, masked_columns
from streaming.format.reader import JointReader, UnmappedFile, open_shard_file, read_offsets, release_mapping
from streaming.storage.untrusted_text import shown

#: Decodes the sample stored at ``buffer[begin:end]``.
Decoder = Callable[[memoryview, int, int], dict[str, Any]]


class _LayoutError(ValueError):
    """A sample's column lengths do not add up to the sample's size (a corrupt length field)."""


class _MappedShard(NamedTuple):
    """What `MDSReader.open` sets up, kept together so that one check tells whether the shard is open.

    ``decode(buffer, begin, end)`` decodes the sample at those file positions and ``read(begin, end)`` gives its
    bytes. A file other users can change is not mapped (`UnmappedFile`): ``buffer`` is then empty, and
    ``decode`` reads the sample's bytes itself.
    """

    buffer: memoryview
    offsets: Sequence[int]
    decode: Decoder
    read: Callable[[int, int], bytes | memoryview]


def build_decoder(names: tuple[str, ...], encodings: tuple[str, ...], sizes: tuple[int | None, ...]) -> Decoder:
    """Compile a function that decodes one sample starting at a byte position of a shard buffer.

    Compiled once per schema and per coder classes, so registering another class under a name takes effect.
    NULL-mask column pairs (``streaming.format.mds.nulls``) are folded back into ``None``.
    """
    decode = _build_decoder(names, encodings, sizes, tuple(type(get_mds_coder(encoding)) for encoding in encodings))
    pairs = masked_columns(names, encodings)
    return fold_nulls(decode, pairs) if pairs else decode


@lru_cache(maxsize=256)
def _build_decoder(
    names: tuple[str, ...], encodings: tuple[str, ...], sizes: tuple[int | None, ...], coder_types: tuple[type, ...]
) -> Decoder:
    # `coder_types` is unused here: it is part of the cache key, so re-registering an encoding recompiles.
    # An MDS sample is a header of uint32 lengths (one per variable-size column), then the values in column order.
    num_variable = sum(size is None for size in sizes)
    unpack_sizes = struct.Struct(f"<{num_variable}I").unpack_from
    # Per column: (name, decoder, fixed size or 0, index of its length in the sample header or -1 when fixed).
    plan: list[tuple[str, ValueDecoder, int, int]] = []
    variable_index = 0
    for name, encoding, size in zip(names, encodings, sizes):
        plan.append((name, value_decoder(encoding), size or 0, -1 if size is not None else variable_index))
        variable_index += size is None
    fixed = sum(size for size in sizes if size is not None)
    if len(plan) == 1:
        # One column (the common token-stream case): a closure without the loop.
        ((name, decode, size, index),) = plan
        if index >= 0:

            def decode_single_variable(buffer: memoryview, begin: int, end: int) -> dict[str, Any]:
                (length,) = unpack_sizes(buffer, begin)
                if begin + 4 + length != end:
                    raise _LayoutError(f"its length field says {length} bytes but it holds {end - begin - 4}")
                return {name: decode(buffer, begin + 4, end)}

            return decode_single_variable

        def decode_single_fixed(buffer: memoryview, begin: int, end: int) -> dict[str, Any]:
            if end - begin != size:
                raise _LayoutError(f"it holds {end - begin} bytes but its column is {size} bytes wide")
            return {name: decode(buffer, begin, end)}

        return decode_single_fixed
    header = 4 * num_variable

    def decode_sample(buffer: memoryview, begin: int, end: int) -> dict[str, Any]:
        lengths = unpack_sizes(buffer, begin)
        if header + fixed + sum(lengths) != end - begin:
            raise _LayoutError(
                f"its length fields add up to {header + fixed + sum(lengths)} bytes but it holds {end - begin}"
            )
        position = begin + header
        sample = {}
        for name, decode, size, index in plan:
            stop = position + (size if index < 0 else lengths[index])
            sample[name] = decode(buffer, position, stop)
            position = stop
        return sample

    return decode_sample


def _first_bad_column(
    names: list[str], encodings: list[str], sizes: list[int | None], data: memoryview
) -> tuple[str | None, BaseException | None]:
    """Decode one sample column by column, to name the column a failure comes from (``None``: its layout)."""
    num_variable = sum(size is None for size in sizes)
    if len(data) < 4 * num_variable:
        first = next(name for name, size in zip(names, sizes) if size is None)
        return first, ValueError(f"the sample's {4 * num_variable}-byte length fields are cut off at {len(data)}")
    lengths = iter(struct.unpack_from(f"<{num_variable}I", data, 0))
    position = 4 * num_variable
    for name, encoding, size in zip(names, encodings, sizes):
        stop = position + (size if size is not None else next(lengths))
        if stop > len(data):
            return name, ValueError(f"its bytes end past the sample (at {stop} of {len(data)})")
        try:
            value_decoder(encoding)(data, position, stop)
        except Exception as err:  # noqa: BLE001 - any failure of a decoder on corrupt bytes is reported
            return name, err
        position = stop
    return None, None


def _check_columns(basename: str, names: Any, encodings: Any, sizes: Any) -> None:
    """Refuse column lists that do not describe one column each (they would decode garbage)."""
    if not (isinstance(names, list) and isinstance(encodings, list) and isinstance(sizes, list)):
        raise ShardCorruptError(
            f"Shard {shown(basename)}: column_names, column_encodings and column_sizes must be lists."
        )
    if not len(names) == len(encodings) == len(sizes):
        raise ShardCorruptError(
            f"Shard {shown(basename)} lists {len(names)} column_names, {len(encodings)} column_encodings and "
            f"{len(sizes)} column_sizes: the index is corrupt."
        )
    for name, size in zip(names, sizes):
        if size is not None and (type(size) is not int or not 0 <= size < 1 << 32):
            raise ShardCorruptError(
                f"Shard {shown(basename)}, column {shown(name)}: column size {size!r} is not a valid size."
            )


class MDSReader(JointReader):
    """One MDS shard: a data file with a sample count, sample offsets, a JSON header and packed samples."""

    index_fields: tuple[str, ...] = ("column_encodings", "column_names", "column_sizes", *JointReader.index_fields)

    def __init__(
        self,
        dirname: str,
        split: str | None,
        column_encodings: list[str],
        column_names: list[str],
        column_sizes: list[int | None],
        compression: str | None,
        hashes: list[str],
        raw_data: dict[str, Any],
        samples: int,
        size_limit: int | None,
        zip_data: dict[str, Any] | None,
    ) -> None:
        super().__init__(dirname, split, compression, hashes, raw_data, samples, size_limit, zip_data)
        _check_columns(self.raw_data.basename, column_names, column_encodings, column_sizes)
        self.column_encodings = column_encodings
        self.column_names = column_names
        self.column_sizes = column_sizes
        #: Set by `validate`: whether the owner allowed columns that run code when decoded (``pkl``).
        self.allow_unsafe_types = False
        self._mapped: _MappedShard | None = None
        self._decode: Decoder | None = None
        self._batch_view: tuple[ShardGather, ShardView] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # An mmap cannot be pickled (DataLoader workers receive the dataset pickled): each process maps anew.
        state = self.__dict__.copy()
        state.update(_mapped=None, _decode=None, _batch_view=None)
        return state

    def validate(self, allow_unsafe_types: bool) -> None:
        """Refuse columns whose encoding can run code when decoded (``pkl``) unless the caller opted in.

        The choice is kept: a reader decodes nothing unsafe until ``validate(True)`` was called on it.
        """
        self.allow_unsafe_types = allow_unsafe_types
        if allow_unsafe_types:
            return
        for name, encoding in zip(self.column_names, self.column_encodings):
            if not is_mds_encoding_safe(encoding):
                raise ValueError(
                    f"Column {shown(name)} contains an unsafe type: {shown(encoding)}. To proceed anyway, set "
                    f"allow_unsafe_types=True."
                )

    def _build_decoder(self) -> Decoder:
        """This shard's decoder, after refusing unsafe columns the owner did not allow (before any byte is read)."""
        self.validate(self.allow_unsafe_types)
        return build_decoder(tuple(self.column_names), tuple(self.column_encodings), tuple(self.column_sizes))

    def open(self) -> _MappedShard:
        """Map the shard file (decompressing it first if only the compressed copy is present and
        `decompresses_on_open`) and check it."""
        self.validate(self.allow_unsafe_types)
        self.open_raw()
        path = self.local_path(self.raw_data.basename)
        opened = open_shard_file(self.tree, self.relative(self.raw_data.basename), self.raw_data.bytes)
        count = self.samples
        if isinstance(opened, UnmappedFile):
            buffer = memoryview(b"")
            offsets = read_offsets(memoryview(opened.read(0, min(len(opened), 4 * (count + 2)))), count, path)
        else:
            buffer = memoryview(opened)
            offsets = read_offsets(buffer, count, path)
        if offsets[count] != len(opened) or (count and offsets[0] > len(opened)):
            raise ShardCorruptError(
                f"Shard file {shown(path)} has sample offsets that point outside the file: it is corrupt."
            )
        self._decode = decode = self._build_decoder()
        if isinstance(opened, UnmappedFile):
            read = opened.read

            def decode_read(_: memoryview, begin: int, end: int) -> dict[str, Any]:
                return decode(memoryview(read(begin, end)), 0, end - begin)

            self._mapped = _MappedShard(buffer, offsets, decode_read, read)
        else:
            self._mapped = _MappedShard(buffer, offsets, decode, lambda begin, end: buffer[begin:end])
        return self._mapped

    def release_pages(self) -> None:
        if self._mapped is not None:
            release_mapping(self._mapped.buffer.obj)

    def get_sample_data(self, idx: int) -> bytes:
        """The encoded bytes of sample ``idx``."""
        mapped = self._mapped or self.open()
        if not 0 <= idx < self.samples:
            raise IndexError(
                f"Sample {idx} is out of range for shard {self.raw_data.basename} of {self.samples} samples."
            )
        return bytes(mapped.read(mapped.offsets[idx], mapped.offsets[idx + 1]))

    def decode_sample(self, data: bytes) -> dict[str, Any]:
        """Decode the encoded bytes of one sample."""
        if self._decode is None:
            self._decode = self._build_decoder()
        view = memoryview(data)
        try:
            return self._decode(view, 0, len(view))
        except Exception as err:
            raise self._corrupt(None, view, err) from err

    def get_item(self, idx: int) -> dict[str, Any]:
        buffer, offsets, decode, read = self._mapped or self.open()
        if not 0 <= idx < self.samples:
            raise IndexError(
                f"Sample {idx} is out of range for shard {self.raw_data.basename} of {self.samples} samples."
            )
        # Decoded straight from the mapped file: no per-sample bytes object (see `get_sample_data`).
        begin = offsets[idx]
        end = offsets[idx + 1]
        try:
            return decode(buffer, begin, end)
        except ShardCorruptError:
            raise
        except Exception as err:
            raise self._corrupt(idx, read(begin, end), err) from err

    def __iter__(self) -> Iterator[dict[str, Any]]:
        mapped = self._mapped or self.open()
        count = self.samples
        # Sample i spans offsets[i]..offsets[i + 1]; the last offset is the end of the file, not a sample.
        samples = map(
            mapped.decode, repeat(mapped.buffer, count), mapped.offsets[:count], mapped.offsets[1 : count + 1]
        )
        try:
            yield from samples
        except ShardCorruptError:
            raise
        except Exception as err:
            failed = next(i for i in range(count) if not self._decodes(mapped, i))
            raise self._corrupt(failed, mapped.read(mapped.offsets[failed], mapped.offsets[failed + 1]), err) from err

    def batch_view(self) -> tuple[ShardGather, ShardView]:
        """The batch reader of this shard's columns and the shard's numpy view (`streaming.format.mds.gather`),
        mapping the shard if needed."""
        mapped = self._mapped or self.open()
        if self._batch_view is None:
            gather = shard_gather(self.column_names, self.column_encodings, self.column_sizes)
            self._batch_view = (gather, gather.view(mapped.buffer, self.samples))
        return self._batch_view

    def get_batch(self, indices: Any) -> Columns:
        """Samples ``indices`` of this shard read at once, as columns (`streaming.format.columns`).

        The values are those of `get_item`, sample by sample; a sample that does not decode raises the error
        `get_item` raises for it (the first such sample in ``indices``' order).
        """
        wanted = np.asarray(indices, np.int64).reshape(-1)
        if wanted.size and (int(wanted.min()) < 0 or int(wanted.max()) >= self.samples):
            bad = int(wanted[(wanted < 0) | (wanted >= self.samples)][0])
            raise IndexError(
                f"Sample {bad} is out of range for shard {self.raw_data.basename} of {self.samples} samples."
            )
        gather, view = self.batch_view()
        try:
            return gather.gather([Segment(view, wanted, None)], len(wanted))
        except Exception as err:
            raise self.first_failure(wanted.tolist(), err) from err

    def first_failure(self, indices: Sequence[int], err: BaseException) -> BaseException:
        """The error `get_item` raises for the first of ``indices`` that fails to decode, else ``err`` itself
        (a batch read failed where every sample decodes: not the shard's fault)."""
        for index in indices:
            try:
                self.get_item(index)
            except ShardCorruptError as corrupt:
                return corrupt
        return err

    def _decodes(self, mapped: _MappedShard, idx: int) -> bool:
        try:
            mapped.decode(mapped.buffer, mapped.offsets[idx], mapped.offsets[idx + 1])
        except Exception:  # noqa: BLE001 - only whether it fails matters here
            return False
        return True

    def _corrupt(self, idx: int | None, data: bytes | memoryview, err: BaseException) -> ShardCorruptError:
        """The error for a sample that fails to decode, naming the shard file, the sample and the column."""
        path = self.local_path(self.raw_data.basename)
        sample = "a sample" if idx is None else f"sample {idx}"
        if isinstance(err, _LayoutError):
            return ShardCorruptError(f"Shard file {shown(path)}, {sample}: {err}; the shard is corrupt.")
        view = memoryview(data)
        column, cause = _first_bad_column(self.column_names, self.column_encodings, self.column_sizes, view)
        where = f", column {shown(column)}" if column is not None else ""
        reason = cause if cause is not None else err
        return ShardCorruptError(
            f"Shard file {shown(path)}, {sample}{where}: cannot be decoded ({type(reason).__name__}: {reason})."
        )
