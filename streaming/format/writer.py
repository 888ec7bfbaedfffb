"""The shard-writing machinery shared by every format: sample accounting, shard files, index and upload.

A writer encodes samples on the caller's thread, cuts them into shards by ``size_limit`` exactly as
MosaicML Streaming does, and hands each finished shard to a small thread pool that compresses, hashes
and writes its files while the caller goes on encoding the next one. Samples are kept as the byte chunks
their encoders produced; an uncompressed shard goes to disk with ``writev`` without being joined.
``index.json`` is written last. Files travel to their destination through the writer's `ShardSink`.
"""

from __future__ import annotations

import contextlib
import json
import os
import weakref
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any

import numpy as np

from streaming.format.compression import check_compression, compress, get_compression_extension
from streaming.format.hashing import check_hashes, get_hash
from streaming.format.index import INDEX_BASENAME, RAW_DATA, RAW_META, ZIP_DATA, ZIP_META, FileInfo, publish_index
from streaming.format.safe_files import create_temp, open_folder
from streaming.format.sink import ShardSink
from streaming.storage.out_argument import parse_out
from streaming.storage.shard_uploader import ShardUploader
from streaming.util import bytes_to_int

MAX_SIZE_LIMIT = 1 << 32
DEFAULT_SIZE_LIMIT = 1 << 26
_WRITER_OPTIONS = ("progress_bar", "max_workers", "retry", "exist_ok")
_IOV_MAX = 1024

#: A file's bytes as pieces to write back to back: encoded samples, or slices of a converter's column buffer.
Chunks = list[bytes | memoryview]
SampleEncoder = Callable[[dict[str, Any]], tuple[Sequence[bytes], int]]


def _available_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parse_size_limit(size_limit: int | str | None) -> int | None:
    """Validate ``size_limit``: None or 0 means unlimited; otherwise 1 byte up to (not including) 4 GiB."""
    if size_limit is None:
        return None
    limit = bytes_to_int(size_limit)
    if limit < 0:
        raise ValueError(f"`size_limit` must be greater than zero, instead, found as {limit}.")
    if limit >= MAX_SIZE_LIMIT:
        raise ValueError(
            f"`size_limit` must be less than 2**32, instead, found as {limit} (size_limit={size_limit!r}). This is "
            f"because sample byte offsets are stored with uint32."
        )
    return limit or None


def offsets_table(first: int, sizes: list[int]) -> bytes:
    """``uint32`` count followed by ``count + 1`` ``uint32`` offsets starting at ``first``, little-endian.

    Raises:
        ValueError: the shard would reach 4 GiB, past what 32-bit offsets can address (they would wrap).
    """
    offsets = np.empty(len(sizes) + 1, dtype=np.int64)
    offsets[0] = first
    np.cumsum(np.asarray(sizes, dtype=np.int64), out=offsets[1:])
    offsets[1:] += first
    if offsets[-1] >= MAX_SIZE_LIMIT:
        raise ValueError(
            f"A shard of {len(sizes)} samples would be {int(offsets[-1])} bytes, but shards must stay under 4 GiB "
            f"(2**32 bytes) because their offsets are 32-bit: set a size_limit below 4 GiB."
        )
    return np.uint32(len(sizes)).tobytes() + offsets.astype("<u4").tobytes()


def _write_chunks(fd: int, chunks: Chunks) -> None:
    try:
        for start in range(0, len(chunks), _IOV_MAX):
            batch = chunks[start : start + _IOV_MAX]
            written = os.writev(fd, batch)
            expected = sum(map(len, batch))
            if written != expected:
                rest = memoryview(b"".join(batch))[written:]
                while rest:
                    rest = rest[os.write(fd, rest) :]
    finally:
        os.close(fd)


class Writer(ABC):
    """Base of every shard writer; subclasses define how samples are encoded and shards laid out.

    Args:
        out: local directory, remote URL, or ``(local, remote)`` pair.
        keep_local: keep local files after upload when there is a remote.
        compression: ``None`` or an algorithm such as ``"zstd"``, ``"zstd:7"``, ``"gz"``, ``"br:5"``.
        hashes: sorted list of hash algorithms recorded in the index for every file.
        size_limit: shard size cap in bytes (int or a string like ``"64mb"``); ``None`` for no cap.
        extra_bytes_per_shard: bytes a shard spends besides its samples (MDS header).
        extra_bytes_per_sample: bytes a sample spends besides its encoding (MDS offset entry).
        sink: where the files go (see :class:`~streaming.format.sink.ShardSink`). By default a
            :class:`~streaming.storage.shard_uploader.ShardUploader` for ``out`` built from the options below; a given
            sink owns the location instead, and ``out`` must then name its local directory (or its remote).
        progress_bar, max_workers, retry, exist_ok: upload options, as in MosaicML Streaming.
    """

    format: str = ""

    def __init__(
        self,
        *,
        out: str | tuple[str, str],
        keep_local: bool = False,
        compression: str | None = None,
        hashes: list[str] | None = None,
        size_limit: int | str | None = DEFAULT_SIZE_LIMIT,
        extra_bytes_per_shard: int = 0,
        extra_bytes_per_sample: int = 0,
        sink: ShardSink | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = sorted(set(kwargs) - set(_WRITER_OPTIONS))
        if unknown:
            raise ValueError(
                f"Invalid Writer argument(s): {unknown}. "
                f"Valid options besides the named ones: {', '.join(_WRITER_OPTIONS)}."
            )
        self.keep_local = keep_local
        self.compression = check_compression(compression)
        self.hashes = check_hashes(list(hashes or []))
        self.size_limit = parse_size_limit(size_limit)
        self.extra_bytes_per_shard = extra_bytes_per_shard
        self.extra_bytes_per_sample = extra_bytes_per_sample
        self.shards: list[dict[str, Any]] = []
        self.samples_written = 0
        self.new_shard_size = extra_bytes_per_shard
        self._chunks: Chunks = []
        self._sample_sizes: list[int] = []
        self._next_shard = 0
        self._finished = False
        self._failure: BaseException | None = None
        # The sink's first refusal (an upload failed): the writer stops taking samples, but the shards already
        # stored locally stay indexed there, so that nothing written is lost.
        self._sink_failure: BaseException | None = None
        self._pending: deque[Future] = deque()
        self._threads = max(1, min(_available_cpus(), 8))
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="mds-shard")
        self.sink = (
            _checked_sink(sink, out, kwargs)
            if sink is not None
            else ShardUploader(
                out,
                index_basename=INDEX_BASENAME,
                keep_local=keep_local,
                exist_ok=kwargs.get("exist_ok", False),
                max_workers=kwargs.get("max_workers"),
                retry=kwargs.get("retry", 2),
                progress_bar=kwargs.get("progress_bar", False),
            )
        )
        self.local = self.sink.local
        self.remote = self.sink.remote
        self._folder = open_folder(self.local)
        weakref.finalize(self, os.close, self._folder)
        self._encode_compiled: SampleEncoder = self.sample_encoder()
        self._encode = self._encode_compiled

    @property
    def cloud_writer(self) -> ShardSink:
        """Upstream's name for the object that moves files to the destination: the writer's sink."""
        return self.sink

    @abstractmethod
    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        """Encode one sample; errors name the column, its encoding and the sample number."""

    def sample_encoder(self) -> SampleEncoder:
        """A function from a sample to ``(chunks, encoded size)``; formats may return a faster one."""

        def encode(sample: dict[str, Any]) -> tuple[Sequence[bytes], int]:
            data = self.encode_sample(sample)
            return (data,), len(data)

        return encode

    @abstractmethod
    def get_config(self) -> dict[str, Any]:
        """The per-shard settings recorded in the index (and, for MDS, the shard header)."""

    @abstractmethod
    def encode_shard(self, chunks: Chunks, sample_sizes: list[int]) -> list[Chunks]:
        """Lay out one shard's files as chunk lists: ``[data]`` (joint formats) or ``[data, meta]`` (split)."""

    @abstractmethod
    def shard_entry(self, num_samples: int, files: list[tuple[FileInfo, FileInfo | None]]) -> dict[str, Any]:
        """Build the index entry for a shard from its (raw, zip) file infos."""

    def shard_basenames(self, shard_id: int) -> list[str]:
        """Raw file names of a shard, in ``encode_shard`` order."""
        return [f"shard.{shard_id:05}.{self.format}"]

    def write(self, sample: dict[str, Any]) -> None:
        """Encode and add one sample, starting a new shard first when it would exceed ``size_limit``."""
        chunks, size = self._encode(sample)
        if self.size_limit and self.size_limit < self.new_shard_size + size + self.extra_bytes_per_sample:
            self.flush_shard()
        self._chunks.extend(chunks)
        self._sample_sizes.append(size)
        self.new_shard_size += size + self.extra_bytes_per_sample
        self.samples_written += 1

    def write_encoded_batch(self, buffer: bytes | memoryview, sizes: Sequence[int]) -> None:
        """Add samples already encoded in this writer's sample layout, stored back to back in ``buffer``.

        For converters that encode whole columns at once (Spark/Arrow). Shards are cut exactly as by ``write``
        (a sample that does not fit closes the shard first, even an empty one), with numpy rather than a Python
        loop per sample; each run of samples that fits in a shard is kept as one slice of ``buffer``.
        """
        if self._finished:
            raise RuntimeError("This writer is finished; create a new writer to write more samples.")
        view = memoryview(buffer)
        lengths = np.asarray(sizes, np.int64)
        if int(lengths.sum()) != len(view):
            raise ValueError(
                f"write_encoded_batch: sizes add up to {int(lengths.sum())} bytes but the buffer has {len(view)}."
            )
        # ends[i]: where sample i ends in the buffer; costs[i]: what samples 0..i add to a shard (with overhead).
        # Each shard is one binary search in `costs` instead of a Python step per sample.
        ends = np.cumsum(lengths)
        costs = np.cumsum(lengths + self.extra_bytes_per_sample)
        position = 0
        while position < len(lengths):
            spent = int(costs[position - 1]) if position else 0
            if self.size_limit:
                room = self.size_limit - self.new_shard_size + spent
                count = int(np.searchsorted(costs, room, "right")) - position
                if count <= 0:
                    self.flush_shard()
                    count = 1
            else:
                count = len(lengths) - position
            stop = position + count
            first = int(ends[position - 1]) if position else 0
            self._chunks.append(view[first : int(ends[stop - 1])])
            self._sample_sizes.extend(lengths[position:stop].tolist())
            self.new_shard_size += int(costs[stop - 1]) - spent
            self.samples_written += count
            position = stop

    def flush_shard(self) -> None:
        """Close the current shard (even an empty one, as upstream does) and store it in the background."""
        self._raise_background_failure()
        self._store_current_shard()

    def _store_current_shard(self) -> None:
        chunks, sizes = self._chunks, self._sample_sizes
        self._chunks, self._sample_sizes = [], []
        self.new_shard_size = self.extra_bytes_per_shard
        shard_id, self._next_shard = self._next_shard, self._next_shard + 1
        files = self.encode_shard(chunks, sizes)
        self._pending.append(self._pool.submit(self._store_shard, shard_id, len(sizes), files))
        while len(self._pending) > 2 * self._threads:
            self._collect(self._pending.popleft())

    def _store_shard(self, shard_id: int, num_samples: int, files: list[Chunks]) -> dict[str, Any]:
        infos: list[tuple[FileInfo, FileInfo | None]] = []
        for basename, chunks in zip(self.shard_basenames(shard_id), files):
            # Joined only when the whole file is needed at once; otherwise the pieces are written as they are.
            joined = b"".join(chunks) if self.compression or self.hashes else None
            raw_info = FileInfo(
                basename, len(joined) if joined is not None else sum(map(len, chunks)), self._digests(joined)
            )
            if self.compression and joined is not None:
                zipped = compress(self.compression, joined)
                zip_name = f"{basename}.{get_compression_extension(self.compression)}"
                self._write_file(zip_name, [zipped])
                infos.append((raw_info, FileInfo(zip_name, len(zipped), self._digests(zipped))))
            else:
                self._write_file(basename, chunks)
                infos.append((raw_info, None))
        return self.shard_entry(num_samples, infos)

    def _digests(self, data: bytes | None) -> dict[str, str]:
        if data is None:  # not joined: no hash was asked for
            return {}
        return {algo: get_hash(algo, data) for algo in self.hashes}

    def _write_file(self, basename: str, chunks: Chunks) -> None:
        # A new file under a random name: a name planted in a pre-created output folder is never followed; made
        # and renamed through the folder's descriptor, so the folder swapped for a link meanwhile changes nothing.
        fd, tmp = create_temp(basename, 0o666, self._folder)
        try:
            _write_chunks(fd, chunks)
            os.replace(tmp, basename, src_dir_fd=self._folder, dst_dir_fd=self._folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=self._folder)
            raise
        try:
            self.sink.upload(basename)
        except BaseException as err:  # noqa: BLE001 - raised by finish(), once the stored shards are indexed
            # The file is complete here whatever the sink says (it may be another file's upload that failed,
            # reported now): the shard stays in the local index, and the sink's error stops the writer.
            if self._sink_failure is None:
                self._sink_failure = err

    def _collect(self, future: Future) -> None:
        try:
            self.shards.append(future.result())
        except BaseException as err:
            self._failure = err  # the writer is broken from here on: no later shard may be indexed
            raise

    def _raise_background_failure(self) -> None:
        failure = self._failure or self._sink_failure
        if failure is not None:
            raise failure
        while self._pending and self._pending[0].done():
            self._collect(self._pending.popleft())

    def _settle(self) -> None:
        """Collect every pending shard in order until one fails (it becomes the writer's failure).

        Shards after a failed one are not indexed (the samples would have a gap), but are waited for, so
        that no shard thread still hands files to the sink once it is aborted.
        """
        while self._pending:
            future = self._pending.popleft()
            if self._failure is None:
                with contextlib.suppress(BaseException):  # kept in self._failure, raised by finish()
                    self._collect(future)
            elif not future.cancel():
                future.exception()

    def finish(self) -> None:
        """Write the last shard, then ``index.json``, then let the sink publish it after every shard.

        If a shard fails to be stored or uploaded (a full disk, a storage error), the local index lists the
        shards stored before it, the sink is aborted with that error, and the error is raised as it is:
        every shard the index names is complete, and no index is published at a remote.
        """
        if self._finished:
            return
        self._finished = True
        self._encode = self._refuse_after_finish
        try:
            try:
                if self._sample_sizes and self._failure is None:
                    self._store_current_shard()  # kept locally even after the sink failed
            except BaseException as err:  # noqa: BLE001 - raised below, after the stored shards are indexed
                self._failure = self._failure or err
            self._settle()
            publish_index(self.local, self.shards, folder=self._folder)
            failure = self._failure or self._sink_failure
            if failure is not None:
                raise failure
            self.sink.finish(INDEX_BASENAME)
        except BaseException as err:
            self.sink.abort(err)
            raise
        finally:
            self._pool.shutdown(wait=True)

    def cancel_future_jobs(self) -> None:
        """Cancel the shards still waiting to be stored and stop the background pool (upstream's abort hook)."""
        while self._pending:
            self._pending.popleft().cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def exception_callback(self, future: Future) -> None:
        """Raise the error of a finished background job, if it failed (upstream's future callback)."""
        error = future.exception()
        if error is not None:
            raise error

    def _refuse_after_finish(self, sample: dict[str, Any]) -> tuple[Sequence[bytes], int]:
        raise RuntimeError("This writer is finished; create a new writer to write more samples.")

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Finish even when the block raised: the index then covers every sample accepted before the error."""
        self.finish()


def _checked_sink(sink: ShardSink, out: str | tuple[str, str], options: dict[str, Any]) -> ShardSink:
    """A sink given to a writer, checked against ``out``: it must name the sink's directory or destination."""
    if not isinstance(sink, ShardSink):
        raise TypeError(f"sink must implement ShardSink (local, remote, upload, finish, abort), got {sink!r}.")
    given = sorted(name for name in options if name in _WRITER_OPTIONS)
    if given:
        raise ValueError(f"{', '.join(given)}: upload options belong to the sink when a sink is given.")
    local, remote = parse_out(out)
    if local is not None and os.path.abspath(local) != os.path.abspath(sink.local):
        raise ValueError(f"`out` names {local!r} but the sink writes from {sink.local!r}.")
    if local is None and remote != sink.remote:
        raise ValueError(f"`out` names {remote!r} but the sink uploads to {sink.remote!r}.")
    return sink


class JointWriter(Writer):
    """A format that stores each shard as one data file (MDS)."""

    def encode_joint_shard(self) -> bytes:
        """Return the file of the shard being filled, as ``flush_shard`` would store it now."""
        (chunks,) = self.encode_shard(self._chunks, self._sample_sizes)
        return b"".join(chunks)


class SplitWriter(Writer):
    """A format that stores each shard as a data file plus a ``.meta`` file of sample offsets and settings."""

    extra_bytes_per_shard = 0
    extra_bytes_per_sample = 0

    def encode_split_shard(self) -> tuple[bytes, bytes]:
        """Return the (data, meta) files of the shard being filled, as ``flush_shard`` would store them now."""
        data, meta = self.encode_shard(self._chunks, self._sample_sizes)
        return b"".join(data), b"".join(meta)

    def shard_basenames(self, shard_id: int) -> list[str]:
        data = f"shard.{shard_id:05}.{self.format}"
        return [data, f"{data}.meta"]

    def data_prefix(self) -> bytes:
        """Bytes at the start of every data file (the XSV header line)."""
        return b""

    def encode_shard(self, chunks: Chunks, sample_sizes: list[int]) -> list[Chunks]:
        prefix = self.data_prefix()
        config = json.dumps(self.get_config(), sort_keys=True).encode("utf-8")
        meta = offsets_table(len(prefix), sample_sizes) + config
        return [[prefix, *chunks] if prefix else chunks, [meta]]

    def shard_entry(self, num_samples: int, files: list[tuple[FileInfo, FileInfo | None]]) -> dict[str, Any]:
        (raw_data, zip_data), (raw_meta, zip_meta) = files
        return {
            **self.get_config(),
            "samples": num_samples,
            RAW_DATA: raw_data.to_json(),
            ZIP_DATA: zip_data.to_json() if zip_data else None,
            RAW_META: raw_meta.to_json(),
            ZIP_META: zip_meta.to_json() if zip_meta else None,
        }
