"""A FUSE filesystem that serves a local folder with the limits of a Databricks `/Volumes` mount, and its fixture.

On a cluster `/Volumes/<catalog>/<schema>/<volume>` is a FUSE mount over cloud object storage. What it refuses,
from the Databricks docs on volumes and on files in volumes and from users' reports, and what this filesystem
therefore refuses with the same error:

* appends: ``open(path, "a")`` (``O_APPEND``) fails with ``ESPIPE`` ("Illegal seek"), as users report;
* non-sequential (random) writes: a write at any offset other than the file's current end, and a truncate to a
  length other than 0 or the current size, fail with ``EOPNOTSUPP`` ("Operation not supported"), which is what
  writing a zip or Excel file in place there gives;
* hard links (``link``), symbolic links and special files fail with ``ENOSYS`` ("Function not implemented",
  os error 38), as object_store/obstore's copy reports on `/Volumes`;
* renames with flags (``renameat2(RENAME_NOREPLACE)``, as delta-rs uses for its commits) fail: this filesystem
  answers ``ENOSYS``, as delta-rs reports (os error 38); the Linux kernel remembers that and gives the caller
  ``EINVAL`` ("Invalid argument") from then on, so code must treat any error there as "not supported".

What it allows, and why:

* plain ``rename``/``os.replace`` of a file or directory works and replaces an existing target: `mv`,
  ``dbutils.fs.mv`` and Python's ``os.replace`` work on volumes (delta-rs's reporters note that "Databricks
  supports copy/rename/delete operations"); on the real mount it is a copy and a delete on object storage, so it
  is atomic for readers only in that a half-copied target never has the final name in a listing we rely on.
* ``flock`` and ``fcntl`` locks are not implemented by the filesystem, so the Linux kernel grants them locally,
  as on a cluster node: they exclude processes on this one machine and nothing between nodes. The package never
  relies on locks on a volume (its coordination files live on the node's local disk).
* reads, ``mmap`` for reading, directory listing, ``mkdir``/``rmdir``/``unlink``, ``fsync``, ``chmod``/``utime``
  (accepted, as ``shutil.copy`` needs them) behave as on a local disk.

``python -m tests.volume_fuse ROOT MOUNTPOINT`` serves ``ROOT`` at ``MOUNTPOINT`` in the foreground; tests use
``mounted_fuse_volume``, which starts that process, waits for the mount and unmounts it with ``fusermount -u``
at the end, also when tests fail. It needs ``/dev/fuse``, libfuse (Debian ``fuse3``; the Makefile installs it)
and ``mfusepy``.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MOUNT_TIMEOUT = 20.0
_STAT_FIELDS = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")


def _operations_class() -> type:
    import mfusepy

    class VolumeMount(mfusepy.Operations):
        """Pass-through to ``root`` that refuses what a Databricks volume mount refuses (see the module docstring)."""

        use_ns = True

        def __init__(self, root: str) -> None:
            self.root = os.path.realpath(root)

        def _path(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            found = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
            attributes = {name: getattr(found, name) for name in _STAT_FIELDS}
            return {name.replace("_ns", ""): value for name, value in attributes.items()}

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._path(path))]

        def statfs(self, path: str) -> dict[str, int]:
            found = os.statvfs(self._path(path))
            names = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_frsize")
            return {name: getattr(found, name) for name in names} | {"f_namemax": found.f_namemax}

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self._path(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(self._path(path))

        def unlink(self, path: str) -> None:
            os.unlink(self._path(path))

        def rename(self, old: str, new: str) -> None:
            os.replace(self._path(old), self._path(new))

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._path(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            """Accepted and ignored: files on a volume belong to the volume, not to a POSIX user."""

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
            os.utime(self._path(path), ns=times)

        def _refuse_appends(self, flags: int) -> None:
            if flags & os.O_APPEND:
                raise mfusepy.FuseOSError(errno.ESPIPE)

        def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
            self._refuse_appends(flags)
            return os.open(self._path(path), flags | os.O_CREAT, mode)

        def open(self, path: str, flags: int) -> int:
            self._refuse_appends(flags)
            return os.open(self._path(path), flags)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            if offset != os.fstat(fh).st_size:
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
            return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            current = os.fstat(fh).st_size if fh is not None else os.stat(self._path(path)).st_size
            if length not in (0, current):
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._path(path), length)

        def flush(self, path: str, fh: int) -> None:
            """Nothing is buffered here: every write went to the backing file."""

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            os.fsync(fh)

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

    return VolumeMount


def _fuse_class() -> type:
    import mfusepy

    class VolumeFUSE(mfusepy.FUSE):
        """mfusepy's libfuse 3 rename drops its flags; a volume mount refuses any rename that has flags."""

        def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
            if flags:
                return -errno.ENOSYS
            return self.rename_fuse_2(old, new)

    return VolumeFUSE


def serve(root: str, mountpoint: str) -> None:
    """Serve ``root`` at ``mountpoint`` until unmounted (blocks)."""
    _fuse_class()(_operations_class()(root), mountpoint, foreground=True, fsname="mds-volume", default_permissions=True)


def _unmount(mountpoint: str) -> None:
    command = shutil.which("fusermount3") or shutil.which("fusermount") or "fusermount"
    subprocess.run([command, "-u", mountpoint], check=False, capture_output=True)


@dataclass(frozen=True)
class FuseVolume:
    """A running mount: ``root`` is its `/Volumes/<catalog>/<schema>/<volume>` path, ``backing`` where files land."""

    root: str
    backing: Path

    def folder(self) -> tuple[str, Path]:
        """A fresh folder on the volume: its `/Volumes/...` path and its backing directory."""
        name = uuid.uuid4().hex[:12]
        (self.backing / name).mkdir()
        return f"{self.root}/{name}", self.backing / name


def mounted_fuse_volume(workdir: Path) -> Iterator[FuseVolume]:
    """Mount a fresh backing folder at `/Volumes/<unique catalog>/default/vol` (a generator for a fixture)."""
    if not os.path.exists("/dev/fuse"):
        raise RuntimeError("The FUSE volume tests need /dev/fuse (a FUSE-capable kernel and container).")
    backing = workdir / "backing"
    backing.mkdir()
    volumes = Path("/Volumes")
    created_volumes = not volumes.exists()
    catalog = volumes / f"mds_fuse_{uuid.uuid4().hex[:10]}"
    mountpoint = catalog / "default" / "vol"
    mountpoint.mkdir(parents=True)
    log = open(workdir / "fuse.log", "wb")  # closed in the finally below, once the server has exited
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.volume_fuse", str(backing), str(mountpoint)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(mountpoint):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"The FUSE volume did not mount at {mountpoint}: {(workdir / 'fuse.log').read_text()}"
                )
            time.sleep(0.05)
        yield FuseVolume(str(mountpoint), backing)
    finally:
        _unmount(str(mountpoint))
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        shutil.rmtree(catalog, ignore_errors=True)
        if created_volumes:
            try:
                volumes.rmdir()
            except OSError:
                pass


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
