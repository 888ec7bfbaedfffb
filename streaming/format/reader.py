"""Shard readers: memory-mapped random access to one shard's samples, with decompression on first use.

A reader is created from its ``index.json`` entry. Files are opened lazily and checked against the index
(size, sample count, last offset), so a truncated or replaced shard fails with an error naming the file.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import posixpath
import stat
import struct
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from streaming.format.array import Array
from streaming.format.compression import decompress
from streaming.format.errors import ShardCorruptError
from streaming.format.index import RAW_DATA, RAW_META, ZIP_DATA, ZIP_META, FileInfo
from streaming.format.safe_files import write_all
from streaming.storage.local_tree import LocalTree, UnsafePathError, read_at_most
from streaming.storage.untrusted_text import shown


class UnmappedFile:
    """A shard file that other users can change, read with ``pread`` instead of a mapping.

    A mapped file truncated by its owner kills the reader with SIGBUS when it touches a page past the new end;
    a ``pread`` past it returns fewer bytes, which fails here as `ShardCorruptError` naming the file. Slices
    (``file[begin:end]``) read those bytes; the descriptor is closed with the object.
    """

    def __init__(self, fd: int, size: int, path: str) -> None:
        self.fd = fd
        self.size = size
        self.path = path

    def read(self, begin: int, end: int) -> bytes:
        """Bytes ``begin`` to ``end`` of the file, all of them or `ShardCorruptError`."""
        data = os.pread(self.fd, end - begin, begin)
        if len(data) != end - begin:
            raise ShardCorruptError(
                f"Shard file {self.path} ended at byte {begin + len(data)} while bytes {begin}..{end} were read (the "
                f"index says {self.size}): it was truncated or replaced while in use."
            )
        return data

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, span: slice) -> bytes:
        return self.read(span.start, span.stop)

    def __del__(self) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.close(self.fd)

    def __reduce__(self) -> Any:
        raise TypeError("an open shard file is not sent to other processes; each opens its own")


def others_can_change(info: os.stat_result) -> bool:
    """Whether a file may be changed, truncated included, by another user: not ours, or world-writable."""
    return info.st_uid != os.geteuid() or bool(info.st_mode & stat.S_IWOTH)


def open_shard_file(tree: LocalTree, relative: str, expected_bytes: int) -> mmap.mmap | bytes | UnmappedFile:
    """A shard file's bytes, checked against the index's size: a read-only mapping when only this user can
    change the file, else an `UnmappedFile` (see there). The file is a regular file reached without following
    a link (`LocalTree.open_file`): a symlink, FIFO or device fails at once."""
    path = tree.path(relative)
    fd, info = tree.open_file(relative)
    try:
        if info.st_size != expected_bytes:
            raise ShardCorruptError(
                f"Shard file {shown(path)} is {info.st_size} bytes but the index says {expected_bytes}: "
                f"it is truncated or was replaced."
            )
        if info.st_size == 0:
            return b""
        if others_can_change(info):
            unmapped, fd = UnmappedFile(fd, info.st_size, path), -1
            return unmapped
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        if fd >= 0:
            os.close(fd)


def release_mapping(mapped: object) -> None:
    """Let the kernel drop this process's pages of a shard's mapping (read again from the file if touched)."""
    # MADV_DONTNEED on a read-only shared file mapping only drops this process's page-table entries: the data is
    # unchanged and views into it (zero-copy arrays handed out) stay valid.
    if isinstance(mapped, mmap.mmap) and not mapped.closed:
        mapped.madvise(mmap.MADV_DONTNEED)


def read_offsets(buffer: memoryview, samples: int, path: str) -> Sequence[int]:
    """The ``samples + 1`` sample offsets after the leading sample count, checked against the index's count."""
    count = int.from_bytes(buffer[:4], "little") if len(buffer) >= 4 else -1
    if count != samples or len(buffer) < 4 * (count + 2):
        raise ShardCorruptError(
            f"Shard file {shown(path)} says it holds {count} samples but the index says {samples}: "
            f"it is corrupt or belongs to another dataset."
        )
    table = buffer[4 : 4 * (count + 2)]
    # Zero-copy on little-endian hosts (the file's byte order): the offsets stay a view over the mapped file.
    return table.cast("I") if sys.byteorder == "little" else struct.unpack(f"<{count + 1}I", table)


class Reader(Array, ABC):
    """One shard of a dataset, read from ``<dirname>/<split>/``; indexable like an :class:`Array`.

    Args:
        dirname: dataset root (local directory).
        split: sub-directory of the split, or ``None``.
        compression: the shard's compression, or ``None``.
        hashes: hash algorithms recorded for its files.
        samples: number of samples.
        size_limit: the writer's shard size cap.
    """

    #: The index-entry keys this class's constructor takes after ``dirname`` and ``split`` (as keywords).
    index_fields: tuple[str, ...] = ("compression", "hashes", "samples", "size_limit")
    #: This shard's ``index.json`` entry, set on the readers `Stream.get_shards` returns (class-level None
    #: elsewhere: the dataset's own readers do not keep it).
    index_entry: dict[str, Any] | None = None
    #: Whether opening the shard decompresses its compressed copy when the raw file is missing (`open_raw`).
    #: A dataset's readers do not: their shard cache prepares the files under the shard's lock and within
    #: ``cache_limit``, so a reader that meets a shard mid-preparation by another process fails with
    #: `FileNotFoundError` and the dataset waits for that preparation, instead of writing a second copy that no
    #: limit counts.
    decompresses_on_open: bool = True

    @classmethod
    def from_json(cls, dirname: str, split: str | None, obj: dict[str, Any]) -> Reader:
        """Build the reader of one shard from its ``index.json`` entry; keys not in `index_fields` are ignored,
        so indexes from newer writers still load."""
        missing = [key for key in cls.index_fields if key not in obj]
        if missing:
            raise ValueError(f"Index entry for a {obj.get('format')} shard is missing fields: {', '.join(missing)}.")
        return cls(dirname, split, **{key: obj[key] for key in cls.index_fields})

    def __init__(
        self,
        dirname: str,
        split: str | None,
        compression: str | None,
        hashes: list[str],
        samples: int,
        size_limit: int | None,
    ) -> None:
        self.dirname = dirname
        self.split = split or ""
        self.compression = compression
        self.hashes = hashes
        self.samples = samples
        self.size_limit = size_limit
        self.file_pairs: list[tuple[FileInfo, FileInfo | None]] = []

    def __len__(self) -> int:
        return self.samples

    @property
    def size(self) -> int:
        """The number of samples."""
        return self.samples

    def local_path(self, basename: str) -> str:
        return os.path.join(self.dirname, self.split, basename)

    @property
    def tree(self) -> LocalTree:
        """The dataset (or cache) folder: its files are reached without following a link below it."""
        return LocalTree(self.dirname)

    def relative(self, basename: str) -> str:
        """A file's path relative to ``dirname`` (``<split>/<basename>``)."""
        split = self.split.strip("/")
        return posixpath.join(split, basename) if split else basename

    def present(self, basename: str) -> bool:
        """Whether a file of this shard is on local disk (one ``lstat``), refusing a file that is a symlink.

        Only an existence check: every open, create and delete of the file goes through `tree`, which refuses a
        symlinked sub-folder whenever it is swapped in.
        """
        try:
            info = os.lstat(self.local_path(basename))
        except (FileNotFoundError, NotADirectoryError):
            return False
        if stat.S_ISLNK(info.st_mode):
            raise UnsafePathError(
                f"{shown(self.local_path(basename))} is a symlink inside dataset folder {self.dirname}: refusing to "
                f"follow it (it could point outside the dataset); replace it with the real file."
            )
        return True

    def checked_path(self, basename: str) -> str:
        """`local_path`, refusing a file that is a symlink (see `present`)."""
        self.present(basename)
        return self.local_path(basename)

    def remove(self, basename: str) -> bool:
        """Delete one local file of this shard (through `tree`: never outside ``dirname``); False if missing."""
        return self.tree.unlink(self.relative(basename))

    def get_max_size(self) -> int:
        """Bytes on disk while a shard is being prepared (raw plus compressed)."""
        return sum(raw.bytes + (zipped.bytes if zipped else 0) for raw, zipped in self.file_pairs)

    def get_raw_size(self) -> int:
        return sum(raw.bytes for raw, _ in self.file_pairs)

    def get_zip_size(self) -> int | None:
        if not self.compression:
            return None
        return sum(zipped.bytes for _, zipped in self.file_pairs if zipped)

    def get_persistent_size(self, keep_zip: bool) -> int:
        """Bytes the shard keeps on disk once ready: raw files, plus compressed ones if ``keep_zip``."""
        if self.compression and keep_zip:
            return self.get_max_size()
        return self.get_raw_size()

    def _evict(self, which: int) -> int:
        """Delete the raw (``which=0``) or compressed (``1``) files present; return the bytes freed."""
        freed = 0
        for pair in self.file_pairs:
            info = pair[which]
            if info is None:
                continue
            if self.remove(info.basename):
                freed += info.bytes
        return freed

    def evict(self) -> int:
        """Delete this shard's local files; return the bytes freed."""
        return self._evict(0) + self._evict(1)

    def set_up_local(self, listing: set[str], safe_keep_zip: bool) -> int:
        """Make the shard's local files consistent and return the bytes they take (upstream's cache scan).

        A form (raw or compressed) counts only when all its files are in ``listing`` (full paths); a partial
        form is deleted. With compression, a raw form without its compressed form is dropped when
        ``safe_keep_zip`` (the compressed files must be kept), and a compressed form beside a complete raw
        form is dropped otherwise.

        Raises:
            ValueError: an uncompressed shard has compressed files.
        """
        present = [0, 0]
        for pair in self.file_pairs:
            for which, info in enumerate(pair):
                if info is not None and self.local_path(info.basename) in listing:
                    present[which] += 1
        has = [False, False]
        for which in (0, 1):
            if present[which] == len(self.file_pairs):
                has[which] = True
            elif present[which]:
                self._evict(which)
        has_raw, has_zip = has
        if not self.compression:
            if has_zip:
                raise ValueError(
                    f"Shard {shown(self.local_path(self.file_pairs[-1][0].basename))} is invalid: it was written "
                    f"without compression, yet compressed files of it exist."
                )
        elif safe_keep_zip and has_raw and not has_zip:
            self._evict(0)
            has_raw = False
        elif not safe_keep_zip and has_raw and has_zip:
            self._evict(1)
            has_zip = False
        return (self.get_raw_size() if has_raw else 0) + ((self.get_zip_size() or 0) if has_zip else 0)

    def validate(self, allow_unsafe_types: bool) -> None:
        """Raise if the shard uses an encoding the caller did not allow (upstream's hook; formats override it).

        `StreamingDataset` calls it for each distinct shard setting before reading anything.
        """

    def release_pages(self) -> None:
        """Unmap from this process the pages of the shard read so far; the next read maps them again.

        They stay in the page cache, so this costs a minor fault per page touched again, while a long iteration
        no longer shows the shard bytes it has read as its own resident, unique memory (RSS/USS).
        """

    def open_raw(self) -> None:
        """Before mapping the raw files: decompress them if needed and allowed (`decompresses_on_open`)."""
        if self.decompresses_on_open:
            self.ensure_raw()

    def ensure_raw(self) -> None:
        """Make every raw file present, decompressing from its compressed copy when needed.

        Concurrent processes may race here: each decompresses into its own temp file and renames it into
        place atomically, so no reader ever sees a partial file.
        """
        for raw, zipped in self.file_pairs:
            if self.present(raw.basename):
                continue
            raw_path = self.local_path(raw.basename)
            if zipped is None:
                raise FileNotFoundError(f"Shard file {raw_path} does not exist.")
            zip_path = self.local_path(zipped.basename)
            if not self.present(zipped.basename):
                raise FileNotFoundError(f"Shard file {raw_path} does not exist, nor its compressed copy {zip_path}.")
            tree = self.tree
            fd, source = tree.open_file(self.relative(zipped.basename))
            try:
                if source.st_size != zipped.bytes:
                    raise ShardCorruptError(
                        f"Shard file {zip_path} is {source.st_size} bytes but the index says "
                        f"{zipped.bytes}: it is truncated or was replaced."
                    )
                data = read_at_most(fd, zipped.bytes, zip_path)
            finally:
                os.close(fd)
            try:
                data = decompress(self.compression, data, max_size=raw.bytes)
            except Exception as err:
                raise ShardCorruptError(
                    f"Shard file {zip_path} cannot be decompressed with {self.compression!r}: {err}"
                ) from err
            if len(data) != raw.bytes:
                raise ShardCorruptError(
                    f"Shard file {zip_path} decompresses to {len(data)} bytes but the index says {raw.bytes}."
                )
            # The copy is no more readable than its source: a private compressed shard stays private. It is
            # created and renamed through its folder's descriptor, so no link swapped in can redirect it.
            with tree.parent(self.relative(raw.basename), create=True) as (folder, name):
                out, temp = tree.create_temp(folder, name, source.st_mode & 0o666)
                try:
                    try:
                        write_all(out, data)
                    finally:
                        os.close(out)
                    os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
                except BaseException:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(temp, dir_fd=folder)
                    raise

    @abstractmethod
    def decode_sample(self, data: bytes) -> dict[str, Any]:
        """Decode one sample from its bytes."""

    @abstractmethod
    def get_sample_data(self, idx: int) -> bytes:
        """Return the bytes of sample ``idx`` of this shard."""

    def get_item(self, idx: int) -> dict[str, Any]:
        return self.decode_sample(self.get_sample_data(idx))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index in range(self.samples):
            yield self.get_item(index)


class JointReader(Reader):
    """A shard stored as one data file (MDS)."""

    index_fields: tuple[str, ...] = ("compression", "hashes", RAW_DATA, "samples", "size_limit", ZIP_DATA)

    def __init__(
        self,
        dirname: str,
        split: str | None,
        compression: str | None,
        hashes: list[str],
        raw_data: dict[str, Any],
        samples: int,
        size_limit: int | None,
        zip_data: dict[str, Any] | None,
    ) -> None:
        super().__init__(dirname, split, compression, hashes, samples, size_limit)
        self.raw_data = FileInfo.from_json(raw_data)
        self.zip_data = FileInfo.from_json(zip_data)
        self.file_pairs = [(self.raw_data, self.zip_data)]


class SplitReader(Reader):
    """A shard stored as a data file plus a ``.meta`` file (JSON, CSV, TSV, XSV)."""

    index_fields: tuple[str, ...] = (
        "compression",
        "hashes",
        RAW_DATA,
        RAW_META,
        "samples",
        "size_limit",
        ZIP_DATA,
        ZIP_META,
    )

    def __init__(
        self,
        dirname: str,
        split: str | None,
        compression: str | None,
        hashes: list[str],
        raw_data: dict[str, Any],
        raw_meta: dict[str, Any],
        samples: int,
        size_limit: int | None,
        zip_data: dict[str, Any] | None,
        zip_meta: dict[str, Any] | None,
    ) -> None:
        super().__init__(dirname, split, compression, hashes, samples, size_limit)
        self.raw_data = FileInfo.from_json(raw_data)
        self.zip_data = FileInfo.from_json(zip_data)
        self.raw_meta = FileInfo.from_json(raw_meta)
        self.zip_meta = FileInfo.from_json(zip_meta)
        self.file_pairs = [(self.raw_meta, self.zip_meta), (self.raw_data, self.zip_data)]
        #: The mapped (or unmapped) data file and the sample offsets from the meta file, once opened.
        self._mapped: tuple[mmap.mmap | bytes | UnmappedFile, Sequence[int]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # An mmap cannot be pickled (DataLoader workers receive the dataset pickled): each process maps anew.
        return {**self.__dict__, "_mapped": None}

    def _open(self) -> tuple[mmap.mmap | bytes | UnmappedFile, Sequence[int]]:
        self.open_raw()
        meta_path = self.local_path(self.raw_meta.basename)
        meta = open_shard_file(self.tree, self.relative(self.raw_meta.basename), self.raw_meta.bytes)
        if isinstance(meta, UnmappedFile):
            meta = meta.read(0, len(meta))  # a count, offsets and settings: small, read once
        offsets = read_offsets(memoryview(meta), self.samples, meta_path)
        data_path = self.local_path(self.raw_data.basename)
        data = open_shard_file(self.tree, self.relative(self.raw_data.basename), self.raw_data.bytes)
        if offsets[-1] != len(data):
            raise ShardCorruptError(
                f"Shard file {data_path} ends at byte {len(data)} but its meta file says {offsets[-1]}."
            )
        self._mapped = data, offsets
        return self._mapped

    def release_pages(self) -> None:
        if self._mapped is not None:
            release_mapping(self._mapped[0])

    def get_sample_data(self, idx: int) -> bytes:
        data, offsets = self._mapped or self._open()
        if not 0 <= idx < self.samples:
            raise IndexError(
                f"Sample {idx} is out of range for shard {self.raw_data.basename} of {self.samples} samples."
            )
        return data[offsets[idx] : offsets[idx + 1]]
