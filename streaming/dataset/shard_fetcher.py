"""`ShardFetcher`: bring one stream's shard files to its local folder: download, verify, decompress, evict.

Used by `ShardCache`, which decides when a shard is fetched (holding the shard's lock, with room made under
``cache_limit``); this module only knows how. Every file appears under its real name only once complete:
downloads go to a temporary name and are renamed (`streaming.storage.download_file`), decompression writes a
temporary file and renames it (`Reader.ensure_raw`), so a crash never leaves a partial shard. A downloaded file
whose size or recorded hash differs from the index is removed and refused (`ShardCorruptError`).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Protocol

from streaming.format.errors import ShardCorruptError
from streaming.format.hashing import get_hash
from streaming.format.index import MAX_INDEX_BYTES
from streaming.format.reader import Reader
from streaming.storage.base import Storage
from streaming.storage.download import download_file


class FetchedStream(Protocol):
    """What a fetcher needs of its stream (a `streaming.dataset.stream.Stream`): where each file lies and the
    download settings. Named here so that this module, which `Stream` uses, does not import it back."""

    @property
    def remote(self) -> str | None: ...

    @property
    def download_retry(self) -> int | None: ...

    @property
    def download_timeout(self) -> float | None: ...

    @property
    def validate_hash(self) -> str | None: ...

    @property
    def safe_keep_zip(self) -> bool: ...

    def local_path(self, basename: str) -> str: ...

    def remote_path(self, basename: str) -> str: ...

    def remote_storage(self) -> Storage | None: ...


class ShardFetcher:
    """Fetches the files of one stream's shards into its local folder, with the stream's download settings."""

    def __init__(self, stream: FetchedStream) -> None:
        self.stream = stream
        # Per folder, its temp files as found on first use: one scan per folder and process, not one per shard.
        self._leftovers: dict[str, dict[str, list[str]]] = {}

    def __getstate__(self) -> dict[str, Any]:
        # What this process found is not what a DataLoader worker will find: each process scans for itself.
        return {"stream": self.stream, "_leftovers": {}}

    def download(self, basename: str, size: int | None = None) -> None:
        """Fetch one file of the dataset; ``size`` is what the index declares (a longer object is stopped)."""
        stream = self.stream
        if stream.remote is None:
            raise FileNotFoundError(
                f"{stream.local_path(basename)} does not exist and the stream has no remote to download it from."
            )
        download_file(
            stream.remote_path(basename),
            stream.local_path(basename),
            # A local remote is read through its folder (no link below it is followed); others by URL.
            storage=stream.remote_storage(),
            retry=stream.download_retry or 2,
            timeout=stream.download_timeout or 60.0,
            # A margin over the declared size, so a slightly longer file still fails as corrupt after download.
            max_bytes=MAX_INDEX_BYTES if size is None else size + (size >> 4) + (1 << 16),
            # Shard files skip the fsync: a copy torn by a power loss is shorter than the index says, which
            # mapping it detects, and the dataset fetches it again. The index has no such check.
            durable=size is None,
        )

    def present_bytes(self, reader: Reader) -> int:
        """Bytes of this shard's files currently on local disk."""
        total = 0
        for raw, zipped in reader.file_pairs:
            for info in (raw, zipped):
                if info is not None and os.path.exists(self.stream.local_path(info.basename)):
                    total += info.bytes
        return total

    def fetch(self, reader: Reader) -> int:
        """Make a shard's raw files present (download, verify, decompress); return the change in bytes on disk.

        The caller holds the shard's lock (`ShardLocks`), so temp files of a missing file are a killed process's,
        and are removed first.
        """
        stream = self.stream
        keep_zip = stream.safe_keep_zip
        before = self.present_bytes(reader)
        for raw, zipped in reader.file_pairs:
            raw_path = reader.checked_path(raw.basename)
            if zipped is not None:
                reader.checked_path(zipped.basename)
            if os.path.exists(raw_path):
                if zipped is not None and not keep_zip:
                    reader.remove(zipped.basename)
                continue
            self._remove_leftover_temps(raw_path)
            if zipped is None:
                self.download(raw.basename, raw.bytes)
                self._verify(raw_path, raw)
                continue
            zip_path = stream.local_path(zipped.basename)
            self._remove_leftover_temps(zip_path)
            if not os.path.exists(zip_path):
                self.download(zipped.basename, zipped.bytes)
            self._verify(zip_path, zipped)
        reader.ensure_raw()
        if not keep_zip:
            for _, zipped in reader.file_pairs:
                if zipped is not None:
                    reader.remove(zipped.basename)
        return self.present_bytes(reader) - before

    def evict(self, reader: Reader) -> int:
        """Delete a shard's local files; return the bytes freed."""
        return reader.evict()

    def _verify(self, path: str, info: Any) -> None:
        size = os.stat(path).st_size
        if size != info.bytes:
            os.remove(path)
            raise ShardCorruptError(
                f"Downloaded {path} is {size} bytes but the index says {info.bytes}; "
                f"removed it so the next attempt downloads it again."
            )
        algorithm = self.stream.validate_hash
        if algorithm:
            expected = info.hashes.get(algorithm)
            if expected is None:
                raise ValueError(
                    f"Hash algorithm `{algorithm}` chosen for data validation does not match with those "
                    f"provided during dataset creation {sorted(info.hashes)} ({path})."
                )
            with open(path, "rb") as f:
                digest = get_hash(algorithm, f.read())
            if digest != expected:
                os.remove(path)
                raise ShardCorruptError(
                    f"Checksum failure: {path} does not match its {algorithm} hash in the index; removed it."
                )

    def _remove_leftover_temps(self, path: str) -> None:
        """Delete what a killed process left while fetching ``path``: its temp files from before this process
        first looked in the folder (the caller holds the shard's lock, so none of them is still being written)."""
        folder, name = os.path.split(path)
        leftovers = self._leftovers.get(folder)
        if leftovers is None:
            leftovers = self._leftovers[folder] = _temps_by_target(folder)
        for leftover in leftovers.pop(name, ()):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)


def _temps_by_target(folder: str) -> dict[str, list[str]]:
    """The partial download (``.<name>.<random>.part``) and decompression (``<name>.tmp.<random>``) files in
    ``folder``, by the name they were for."""
    found: dict[str, list[str]] = {}
    try:
        entries = os.scandir(folder)
    except FileNotFoundError:
        return found
    with entries:
        for entry in entries:
            name = entry.name
            if name.startswith(".") and name.endswith(".part"):
                target = name[1 : -len(".part")].rpartition(".")[0]
            elif ".tmp." in name:
                target = name.rpartition(".tmp.")[0]
            else:
                continue
            if target:
                found.setdefault(target, []).append(entry.path)
    return found
