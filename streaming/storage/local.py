"""Local files: plain paths, `file://` URLs, and `/Volumes/...` paths when the volume is mounted here."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

from streaming.storage.base import CHUNK_SIZE, Storage
from streaming.storage.errors import ObjectNotFoundError, StorageError, StoragePermissionError
from streaming.storage.registry import volume_mount
from streaming.storage.url import split_url


def local_path(url: str) -> str:
    """The filesystem path that a local URL (`/x`, `file:///x`, a mounted `dbfs:/Volumes/x`) names."""
    mounted = volume_mount(url)
    if mounted is not None:
        return mounted
    location = split_url(url)
    return os.path.expanduser(location.key)


def _copy_beside(local_file: str, target: str, durable: bool) -> str:
    """Copy ``local_file`` to a fresh temp name in ``target``'s folder (created if needed); return that name.

    ``durable`` syncs the copy first, for a create-only publish whose name must never appear with a torn body.
    """
    directory = os.path.dirname(os.path.abspath(target))
    os.makedirs(directory, exist_ok=True)
    handle, temp_path = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as sink, open(local_file, "rb") as source:
            shutil.copyfileobj(source, sink, CHUNK_SIZE)
            if durable:
                sink.flush()
                os.fsync(sink.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_path)
        raise
    return temp_path


#: What a filesystem without hard links answers to ``link()`` (a Databricks volume's FUSE mount: ENOSYS).
_NO_LINK = {errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}


def _create_exclusively(local_file: str, target: str) -> bool:
    """Create ``target`` with ``O_CREAT | O_EXCL`` and copy ``local_file`` into it; False if it existed.

    The fallback where ``link()`` is refused: the name is claimed atomically, but its bytes arrive after it,
    so readers of such a file (the commit log) wait for it to parse before trusting it.
    """
    try:
        handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(handle, "wb") as sink, open(local_file, "rb") as source:
        shutil.copyfileobj(source, sink, CHUNK_SIZE)
        sink.flush()
        os.fsync(sink.fileno())
    return True


class LocalStorage(Storage):
    """Plain file I/O; `put` writes a temp file next to the target and renames it into place."""

    @staticmethod
    def cache_key(url: str) -> str:
        return ""

    def _download(self, url: str, sink: BinaryIO, timeout: float) -> int | None:
        with open(local_path(url), "rb") as source:
            shutil.copyfileobj(source, sink, CHUNK_SIZE)
            return os.fstat(source.fileno()).st_size

    def _upload(self, local_file: str, url: str) -> None:
        target = local_path(url)
        temp_path = _copy_beside(local_file, target, durable=False)
        try:
            os.replace(temp_path, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp_path)
            raise

    def _upload_if_absent(self, local_file: str, url: str) -> bool:
        target = local_path(url)
        temp_path = _copy_beside(local_file, target, durable=True)
        try:
            try:
                os.link(temp_path, target)  # atomic, never replaces, and the name appears complete
                return True
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in _NO_LINK:
                    raise
            return _create_exclusively(local_file, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp_path)

    def _list(self, prefix_url: str) -> Iterator[str]:
        root = local_path(prefix_url)
        prefix = prefix_url.rstrip("/").rstrip(os.sep)
        for directory, _, files in os.walk(root):
            relative = os.path.relpath(directory, root)
            for name in files:
                yield os.path.join(prefix, name) if relative == "." else os.path.join(prefix, relative, name)

    def _size(self, url: str) -> int | None:
        path = local_path(url)
        return os.path.getsize(path) if os.path.isfile(path) else None

    def _modified(self, url: str) -> float | None:
        path = local_path(url)
        return os.path.getmtime(path) if os.path.isfile(path) else None

    def _delete(self, url: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(local_path(url))

    def _classify(self, exc: Exception, url: str) -> StorageError | None:
        if isinstance(exc, FileNotFoundError):
            # The OS's own words ("No such file or directory") last, as callers of upstream match them.
            return ObjectNotFoundError(url, f"no such file {local_path(url)!r}: {exc.strerror or 'not found'}")
        if isinstance(exc, PermissionError):
            return StoragePermissionError(
                url, f"permission denied on {exc.filename or local_path(url)!r}; check the file mode and owner"
            )
        if isinstance(exc, OSError):  # a full disk, a directory in the file's place, a read-only filesystem...
            return StorageError(url, f"{exc.strerror or exc} on {exc.filename or local_path(url)!r}")
        return None
