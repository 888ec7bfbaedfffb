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
  supports copy/rename/delete operations"). A file's rename is what it is on object storage, a copy and then a
  delete of the source: for a moment both names exist;
* ``flock`` and ``fcntl`` locks are not implemented by the filesystem, so the Linux kernel grants them locally,
  as on a cluster node: they exclude processes on this one machine and nothing between nodes. The package never
  relies on locks on a volume (its coordination files live on the node's local disk).
* reads, ``mmap`` for reading, directory listing, ``mkdir``/``rmdir``/``unlink``, ``fsync``, ``chmod``/``utime``
  (accepted, as ``shutil.copy`` needs them) behave as on a local disk.

Visibility is close-to-open, as on a cluster's mount, where a written file is uploaded when it is closed: a file
opened for writing lives in this mount's own staging folder (the node's local disk) until it is closed, and only
then replaces the file of that name in the backing folder, whole (``--upload-delay`` seconds later: the upload).
Until then the mount that writes it sees it and every other mount does not, so ``O_CREAT | O_EXCL`` is exclusive
among the processes of one mount (one node) only: two mounts can both create a name, and the last to close wins.
Several mounts of one backing folder (`mounted_fuse_volumes`) are the nodes of one cluster.

``python -m tests.volume_fuse ROOT MOUNTPOINT [--staging DIR] [--upload-delay S]`` serves ``ROOT`` at
``MOUNTPOINT`` in the foreground; tests use ``mounted_fuse_volume`` (one mount) or ``mounted_fuse_volumes``
(several), which start those processes, wait for the mounts and unmount them with ``fusermount -u`` at the end,
also when tests fail. It needs ``/dev/fuse``, libfuse (Debian ``fuse3``; the Makefile installs it) and ``mfusepy``.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import subprocess
import sys
import threading
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
        """Pass-through to ``root`` that refuses what a Databricks volume mount refuses and shows a written file to
        other mounts only once it is closed (see the module docstring)."""

        use_ns = True

        def __init__(self, root: str, staging: str, upload_delay: float = 0.0) -> None:
            self.root = os.path.realpath(root)
            self.staging = os.path.realpath(staging)
            self.upload_delay = upload_delay
            self.mutex = threading.Lock()  # not "lock": mfusepy would take it for the POSIX lock operation
            self.staged: dict[str, str] = {}  # volume path -> its staged file, while open for writing here
            self.writers: dict[int, tuple[str, str]] = {}  # handle -> (volume path, staged file)
            self.names = itertools.count()

        def _path(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def _seen(self, path: str) -> str:
            """Where this mount reads ``path`` from: its own staged file while it writes one, else the backing."""
            return self.staged.get(path) or self._path(path)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            found = os.fstat(fh) if fh is not None else os.lstat(self._seen(path))
            attributes = {name: getattr(found, name) for name in _STAT_FIELDS}
            return {name.replace("_ns", ""): value for name, value in attributes.items()}

        def readdir(self, path: str, fh: int) -> list[str]:
            names = set(os.listdir(self._path(path)))
            prefix = path.rstrip("/") + "/"
            names |= {
                name[len(prefix) :]
                for name in self.staged
                if name.startswith(prefix) and "/" not in name[len(prefix) :]
            }
            return [".", "..", *sorted(names)]

        def statfs(self, path: str) -> dict[str, int]:
            found = os.statvfs(self._path(path))
            names = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_frsize")
            return {name: getattr(found, name) for name in names} | {"f_namemax": found.f_namemax}

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self._path(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(self._path(path))

        def unlink(self, path: str) -> None:
            with self.mutex:
                staged = self.staged.pop(path, None)
            if staged is None:
                os.unlink(self._path(path))
            elif os.path.lexists(self._path(path)):
                os.unlink(self._path(path))

        def rename(self, old: str, new: str) -> None:
            with self.mutex:
                self.staged.pop(old, None)  # a closed file whose release has not arrived yet: uploaded already
                self.staged.pop(new, None)
            source, target = self._path(old), self._path(new)
            if os.path.isdir(source):
                os.replace(source, target)
                return
            # Object storage has no rename: the file is copied to the new name, then the old one deleted.
            temporary = f"{target}.{uuid.uuid4().hex}.copying"
            shutil.copyfile(source, temporary)
            os.replace(temporary, target)
            os.unlink(source)

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self._seen(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            """Accepted and ignored: files on a volume belong to the volume, not to a POSIX user."""

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
            os.utime(self._seen(path), ns=times)

        def _refuse_appends(self, flags: int) -> None:
            if flags & os.O_APPEND:
                raise mfusepy.FuseOSError(errno.ESPIPE)

        def _stage(self, path: str, flags: int, mode: int, copy_current: bool) -> int:
            staged = os.path.join(self.staging, f"{next(self.names)}.staged")
            if copy_current and os.path.exists(self._seen(path)):
                shutil.copyfile(self._seen(path), staged)
            access = flags & (os.O_WRONLY | os.O_RDWR)
            handle = os.open(staged, access | os.O_CREAT, mode)
            self.staged[path] = staged
            self.writers[handle] = (path, staged)
            return handle

        def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
            self._refuse_appends(flags)
            with self.mutex:
                # O_EXCL sees this node's own files being written and what other nodes have closed: nothing else.
                if flags & os.O_EXCL and (path in self.staged or os.path.lexists(self._path(path))):
                    raise mfusepy.FuseOSError(errno.EEXIST)
                return self._stage(path, flags, mode, copy_current=False)

        def open(self, path: str, flags: int) -> int:
            self._refuse_appends(flags)
            if flags & (os.O_WRONLY | os.O_RDWR):
                with self.mutex:
                    return self._stage(path, flags, 0o644, copy_current=not flags & os.O_TRUNC)
            return os.open(self._seen(path), flags)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            if offset != os.fstat(fh).st_size:
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
            return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            current = os.fstat(fh).st_size if fh is not None else os.stat(self._seen(path)).st_size
            if length not in (0, current):
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._seen(path), length)

        def flush(self, path: str, fh: int) -> None:
            """Each ``close()`` of a descriptor uploads the file (the kernel waits for this; ``release`` comes later,
            asynchronously)."""
            with self.mutex:
                written = self.writers.get(fh)
                current = written is not None and self.staged.get(written[0]) == written[1]
            if not current:
                return
            name, staged = written
            time.sleep(self.upload_delay)  # the upload of the closed file to object storage
            target = self._path(name)
            uploading = f"{target}.{uuid.uuid4().hex}.uploading"
            shutil.copyfile(staged, uploading)
            os.replace(uploading, target)  # the object appears whole, replacing any other node's upload

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            os.fsync(fh)

        def release(self, path: str, fh: int) -> None:
            with self.mutex:  # before the close: the descriptor's number is free for the next open after it
                written = self.writers.pop(fh, None)
                if written is not None and self.staged.get(written[0]) == written[1]:
                    del self.staged[written[0]]
            os.close(fh)
            if written is not None:
                os.unlink(written[1])

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


def serve(root: str, mountpoint: str, staging: str, upload_delay: float = 0.0) -> None:
    """Serve ``root`` at ``mountpoint`` until unmounted (blocks); files being written wait in ``staging``."""
    _fuse_class()(
        _operations_class()(root, staging, upload_delay),
        mountpoint,
        foreground=True,
        fsname="mds-volume",
        default_permissions=True,
        # No attribute or name caching in the kernel: every open and lookup asks the mount, as close-to-open needs.
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )


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

    @property
    def catalog(self) -> str:
        return self.root.split("/")[2]


def _detach(mountpoint: Path) -> None:
    """Unmount, and if the mount is still there (busy, or its server already gone) detach it lazily."""
    _unmount(str(mountpoint))
    try:
        still = os.path.ismount(mountpoint)
    except OSError:
        still = True
    if still or _dead(mountpoint):
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, capture_output=True)


def _dead(mountpoint: Path) -> bool:
    """Whether ``mountpoint`` is a mount whose server is gone (it answers ENOTCONN)."""
    try:
        os.stat(mountpoint)
    except OSError as err:
        return err.errno == errno.ENOTCONN
    return False


def _clear_dead_mounts(volumes: Path) -> None:
    """Unmount and remove the mounts of earlier runs whose server is gone (a test process killed before its
    teardown leaves its mount behind, answering ENOTCONN); live mounts of runs going on beside this one stay."""
    names = os.listdir(volumes) if volumes.is_dir() else []
    for mountpoint in (volumes / name / "default" / "vol" for name in names if name.startswith("mds_fuse_")):
        if not _dead(mountpoint):
            continue
        _detach(mountpoint)
        shutil.rmtree(mountpoint.parents[1], ignore_errors=True)


def mounted_fuse_volume(workdir: Path) -> Iterator[FuseVolume]:
    """Mount a fresh backing folder at `/Volumes/<unique catalog>/default/vol` (a generator for a fixture)."""
    for volumes in mounted_fuse_volumes(workdir, mounts=1):
        yield volumes[0]


def mounted_fuse_volumes(workdir: Path, mounts: int = 2, upload_delay: float = 0.0) -> Iterator[list[FuseVolume]]:
    """Mount one fresh backing folder ``mounts`` times, each at its own `/Volumes/<unique catalog>/default/vol`:
    the nodes of one cluster, each with its own staging folder (a generator for a fixture)."""
    if not os.path.exists("/dev/fuse"):
        raise RuntimeError("The FUSE volume tests need /dev/fuse (a FUSE-capable kernel and container).")
    backing = workdir / "backing"
    backing.mkdir()
    volumes = Path("/Volumes")
    _clear_dead_mounts(volumes)
    created_volumes = not volumes.exists()
    started: list[tuple[Path, Path, subprocess.Popen, Any]] = []
    try:
        for number in range(mounts):
            catalog = volumes / f"mds_fuse_{uuid.uuid4().hex[:10]}"
            mountpoint = catalog / "default" / "vol"
            mountpoint.mkdir(parents=True)
            staging = workdir / f"staging-{number}"
            staging.mkdir()
            log_path = workdir / f"fuse-{number}.log"
            log = open(log_path, "wb")  # closed in the finally below, once the server has exited
            argv = [sys.executable, "-m", "tests.volume_fuse", str(backing), str(mountpoint), "--staging", str(staging)]
            argv += ["--upload-delay", str(upload_delay)]
            server = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[1]
            )
            started.append((catalog, mountpoint, server, log))
            deadline = time.monotonic() + MOUNT_TIMEOUT
            while not os.path.ismount(mountpoint):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"The FUSE volume did not mount at {mountpoint}: {log_path.read_text()}")
                time.sleep(0.05)
        yield [FuseVolume(str(mountpoint), backing) for _, mountpoint, _, _ in started]
    finally:
        for catalog, mountpoint, server, log in started:
            _unmount(str(mountpoint))
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            _detach(mountpoint)  # a mount fusermount could not take (busy) is left dead once its server is gone
            log.close()
            shutil.rmtree(catalog, ignore_errors=True)
        if created_volumes:
            try:
                volumes.rmdir()
            except OSError:
                pass


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Serve a folder with a Databricks volume mount's limits.")
    parser.add_argument("root")
    parser.add_argument("mountpoint")
    parser.add_argument("--staging", required=True, help="this mount's folder for files being written")
    parser.add_argument("--upload-delay", type=float, default=0.0, help="seconds a closed file takes to upload")
    arguments = parser.parse_args()
    serve(arguments.root, arguments.mountpoint, arguments.staging, arguments.upload_delay)
