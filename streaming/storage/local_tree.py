"""`LocalTree`: a folder on this machine whose contents are reached without ever following a link below it.

A dataset folder, a cache, a copy's destination or a source folder may be shared with other users, or crafted.
Every path below the root comes from data or a listing, so it is checked (`check_relative_path`) and then
walked one component at a time from a descriptor of the root: each folder is opened with
``openat(O_DIRECTORY | O_NOFOLLOW)`` relative to the one before, files are opened, created
(``O_EXCL``, under random names), renamed (``renameat``), linked (``linkat``) and deleted (``unlinkat``)
relative to the descriptor of their own folder. A folder swapped for a symlink at any moment, between a listing
and a delete included, therefore makes the operation fail (`UnsafePathError`) instead of reaching outside.

Files are opened ``O_NOFOLLOW | O_NONBLOCK`` and must be regular files: a symlink, a FIFO (which would block
a reader forever), a device or a folder fails at once. The root itself is the caller's choice (it may be a
symlink, as a user's own ``/data -> /mnt/disk`` is).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from typing import BinaryIO

from streaming.storage.untrusted_text import shown as untrusted
from streaming.storage.url import UnsafePathError, check_relative_path

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_FOLDER_FLAGS = os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC
#: What a filesystem without hard links answers to ``link()`` (a Databricks volume's FUSE mount: ENOSYS).
NO_LINK = {errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}
_CHUNK = 1 << 20

__all__ = ["LocalTree", "NotRegularFileError", "UnsafePathError", "FileTooLargeError"]


class NotRegularFileError(UnsafePathError):
    """A file of a dataset that is a FIFO, a device or a folder (reading it could block or never end)."""


class FileTooLargeError(ValueError):
    """A file larger than its reader allows (the size its index declares, or a bound for files without one)."""


def _link_error(path: str, root: str) -> UnsafePathError:
    return UnsafePathError(
        f"{untrusted(path)} is a symlink inside folder {untrusted(root)}: refusing to follow it (it could point "
        f"outside the folder); replace it with the real folder or file."
    )


def open_regular(
    name: str, dir_fd: int | None, shown: str, root: str, *, follow: bool = False
) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``name`` (in ``dir_fd``), never following a link or blocking.

    ``O_NONBLOCK`` makes a FIFO's open return at once (it is then refused); the flag is cleared again, so reads
    of the regular file block as usual. ``follow`` follows a link (for a path the caller named itself).

    Raises:
        UnsafePathError: ``name`` is a symlink.
        NotRegularFileError: it is a FIFO, a device, a socket or a folder.
    """
    try:
        fd = os.open(name, os.O_RDONLY | (0 if follow else O_NOFOLLOW) | O_NONBLOCK | O_CLOEXEC, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _link_error(shown, root) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFileError(
                f"{untrusted(shown)} is not a regular file (a FIFO, device or folder): refusing to read it, since "
                f"reading it could block or never end."
            )
        if O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_at_most(fd: int, limit: int, shown: str) -> bytes:
    """Every byte of the open file ``fd`` (from its start), refusing more than ``limit``."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = os.pread(fd, min(_CHUNK, limit + 1 - total), total)
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        total += len(chunk)
        if total > limit:
            raise FileTooLargeError(
                f"{untrusted(shown)} holds more than the {limit} bytes allowed for it; refusing to read it."
            )


class LocalTree:
    """The folder ``root`` (a local path); every method takes ``/``-separated paths relative to it."""

    def __init__(self, root: str) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"LocalTree({self.root!r})"

    def path(self, relative: str) -> str:
        """The filesystem path of ``relative``, for messages (never opened by this name)."""
        return os.path.join(self.root, *relative.split("/")) if relative else self.root

    # -- descriptors ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def folder(self, relative: str = "", *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder ``relative`` (``""``: the root), each component opened without following
        a link; with ``create`` the missing folders are made (mode 0777 less the umask, as ``makedirs``)."""
        if relative:
            check_relative_path(relative, f"folder below {self.root}")
        if create:
            os.makedirs(self.root, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try:
            done: list[str] = []
            for part in relative.split("/") if relative else ():
                done.append(part)
                child = self._open_folder(fd, part, "/".join(done), create)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def _open_folder(self, parent: int, name: str, relative: str, create: bool) -> int:
        for _ in range(2):
            try:
                return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, "No such file or directory", self.path(relative)) from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=parent)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    info = os.stat(name, dir_fd=parent, follow_symlinks=False)
                    if stat.S_ISLNK(info.st_mode):
                        raise _link_error(self.path(relative), self.root) from None
                    raise NotADirectoryError(errno.ENOTDIR, "Not a directory", self.path(relative)) from None
                raise
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent)

    @contextlib.contextmanager
    def parent(self, relative: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """A descriptor of the folder holding ``relative`` and the file's own name in it."""
        check_relative_path(relative, f"file below {self.root}")
        folder, _, name = relative.rpartition("/")
        with self.folder(folder, create=create) as fd:
            yield fd, name

    # -- reading ---------------------------------------------------------------------------------
    def open_file(self, relative: str) -> tuple[int, os.stat_result]:
        """A read-only descriptor of the regular file ``relative`` and its status (see `open_regular`)."""
        with self.parent(relative) as (fd, name):
            return open_regular(name, fd, self.path(relative), self.root)

    def read_bytes(self, relative: str, limit: int) -> bytes:
        """The bytes of a regular file of at most ``limit`` bytes (`FileTooLargeError` past it)."""
        fd, info = self.open_file(relative)
        try:
            if info.st_size > limit:
                raise FileTooLargeError(
                    f"{self.path(relative)} is {info.st_size} bytes, more than the {limit} allowed for it; refusing "
                    f"to read it."
                )
            return read_at_most(fd, limit, self.path(relative))
        finally:
            os.close(fd)

    def copy_to(self, relative: str, sink: BinaryIO, limit: int | None = None) -> int:
        """Copy a regular file to ``sink``; returns its size. More than ``limit`` bytes fail."""
        fd, info = self.open_file(relative)
        try:
            if limit is not None and info.st_size > limit:
                raise FileTooLargeError(
                    f"{self.path(relative)} is {info.st_size} bytes, more than the {limit} expected; refusing to "
                    f"copy it."
                )
            total = 0
            while chunk := os.read(fd, _CHUNK):
                total += len(chunk)
                if limit is not None and total > limit:
                    raise FileTooLargeError(f"{self.path(relative)} grew past the {limit} bytes expected.")
                sink.write(chunk)
            return info.st_size
        finally:
            os.close(fd)

    def stat(self, relative: str) -> os.stat_result | None:
        """The status of ``relative`` itself (a link is not followed), or None when it does not exist."""
        try:
            with self.parent(relative) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def walk(self, folder: str = "") -> Iterator[str]:
        """Every non-folder entry below ``folder`` (files, and links as themselves), as root-relative paths.

        Sub-folders are opened relative to their parent's descriptor without following links, so a folder
        swapped for a link while the walk runs is skipped, never entered.
        """
        try:
            with self.folder(folder) as fd:
                yield from self._walk(fd, folder)
        except FileNotFoundError:
            return

    def _walk(self, fd: int, relative: str) -> Iterator[str]:
        with os.scandir(fd) as entries:
            listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for name, is_folder in listed:
            child = f"{relative}/{name}" if relative else name
            if not is_folder:
                yield child
                continue
            try:
                sub = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
            except OSError as err:
                if err.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    continue  # removed, or swapped for a link or a file, since it was listed
                raise
            try:
                yield from self._walk(sub, child)
            finally:
                os.close(sub)

    # -- writing -----------------------------------------------------------------------------------
    def create_temp(self, dir_fd: int, name: str, mode: int = 0o666) -> tuple[int, str]:
        """A new file in ``dir_fd`` under an unguessable name beside ``name``: (write descriptor, its name)."""
        while True:
            temp = f".{name}.{secrets.token_hex(6)}.part"
            try:
                return os.open(temp, _NEW_FILE_FLAGS, mode, dir_fd=dir_fd), temp
            except FileExistsError:
                continue

    def write_file(self, relative: str, source: BinaryIO, *, durable: bool = False, mode: int = 0o666) -> None:
        """Publish ``relative`` atomically from ``source``: a temp file in its folder, renamed over the name."""
        with self.parent(relative, create=True) as (fd, name):
            handle, temp = self.create_temp(fd, name, mode)
            try:
                with os.fdopen(handle, "wb") as sink:
                    _copy(source, sink)
                    if durable:
                        sink.flush()
                        os.fsync(sink.fileno())
                os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=fd)
                raise

    def create_exclusive(self, relative: str, source: BinaryIO) -> bool:
        """Create ``relative`` from ``source`` only if nothing has that name (a link included); False if taken.

        A complete temp file is hard-linked to the name (atomic, never replaces, the name appears complete);
        where ``link`` is refused (a FUSE mount), the name is claimed with ``O_EXCL`` and filled after.
        """
        with self.parent(relative, create=True) as (fd, name):
            handle, temp = self.create_temp(fd, name, 0o644)
            try:
                with os.fdopen(handle, "wb") as sink:
                    _copy(source, sink)
                    sink.flush()
                    os.fsync(sink.fileno())
                try:
                    os.link(temp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
                    return True
                except FileExistsError:
                    return False
                except OSError as exc:
                    if exc.errno not in NO_LINK:
                        raise
                try:
                    claimed = os.open(name, _NEW_FILE_FLAGS, 0o644, dir_fd=fd)
                except FileExistsError:
                    return False
                source.seek(0)
                with os.fdopen(claimed, "wb") as sink:
                    _copy(source, sink)
                    sink.flush()
                    os.fsync(sink.fileno())
                return True
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=fd)

    # -- deleting ----------------------------------------------------------------------------------
    def unlink(self, relative: str) -> bool:
        """Delete the entry ``relative`` (a link is deleted itself, never its target); False if it was missing."""
        try:
            with self.parent(relative) as (fd, name):
                os.unlink(name, dir_fd=fd)
                return True
        except FileNotFoundError:
            return False

    def remove_tree(self, relative: str) -> None:
        """Delete the folder ``relative`` and everything below it (links deleted as themselves); missing is fine."""
        try:
            with self.parent(relative) as (fd, name):
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISDIR(info.st_mode):
                    os.unlink(name, dir_fd=fd)
                    return
                sub = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
                try:
                    self._empty(sub)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
        except FileNotFoundError:
            return

    def _empty(self, fd: int) -> None:
        """Delete everything in the folder ``fd``, each sub-folder opened without following a link."""
        with os.scandir(fd) as entries:
            listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for name, is_folder in listed:
            if not is_folder:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
                continue
            try:
                sub = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                continue
            try:
                self._empty(sub)
            finally:
                os.close(sub)
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(name, dir_fd=fd)

    def remove_empty_folders(self, folder: str = "") -> None:
        """Remove the empty folders below ``folder`` (not ``folder`` itself), deepest first."""
        try:
            with self.folder(folder) as fd:
                self._prune(fd)
        except FileNotFoundError:
            return

    def _prune(self, fd: int) -> bool:
        """Prune below ``fd``; return whether the folder is empty afterwards."""
        with os.scandir(fd) as entries:
            listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        empty = True
        for name, is_folder in listed:
            if not is_folder:
                empty = False
                continue
            try:
                sub = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
            except OSError:
                empty = False
                continue
            try:
                prunable = self._prune(sub)
            finally:
                os.close(sub)
            if prunable:
                try:
                    os.rmdir(name, dir_fd=fd)
                    continue
                except OSError:  # refilled meanwhile, or not ours to remove
                    pass
            empty = False
        return empty


def _copy(source: BinaryIO, sink: BinaryIO) -> None:
    while chunk := source.read(_CHUNK):
        sink.write(chunk)
