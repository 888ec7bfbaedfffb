"""Hand finished shard files to their destination: a local directory now, a remote store in the background.

Writers write every file into ``ShardUploader.local`` and call ``upload(basename)`` once a file is complete;
``finish()`` publishes ``index.json`` last, so a reader never sees an index naming a missing shard.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from urllib.parse import urlparse


def _is_remote(path: str) -> bool:
    scheme = urlparse(path).scheme
    return bool(scheme) and scheme != "file" and len(scheme) > 1


class ShardUploader:
    """Owns the output location of one writer.

    Args:
        out: a local directory, a remote URL, or a ``(local, remote)`` pair.
        keep_local: keep local copies after upload (only meaningful with a remote).
        exist_ok: allow a non-empty destination; its old local contents are removed first.
        max_workers: background upload threads.
        retry: total upload attempts per file.
        progress_bar: show upload progress.
    """

    def __init__(self, out: str | tuple[str, str], *, keep_local: bool = False, exist_ok: bool = False,
                 max_workers: int | None = None, retry: int = 2, progress_bar: bool = False) -> None:
        if isinstance(out, (tuple, list)):
            if len(out) != 2:
                raise ValueError(f"`out` must be a directory, a URL or a (local, remote) pair, got {out!r}.")
            local, remote = out
        elif _is_remote(out):
            local, remote = tempfile.mkdtemp(prefix="mds-out-"), out
        else:
            local, remote = out, None
        if remote is not None:
            raise NotImplementedError(f"Remote output {remote!r} needs a storage backend for its scheme.")
        local = os.path.expanduser(local.removeprefix("file://") if isinstance(local, str) else local)
        if os.path.isdir(local) and os.listdir(local):
            if not exist_ok:
                raise FileExistsError(f"Directory is not empty: {local} (pass exist_ok=True to replace it).")
            shutil.rmtree(local)
        os.makedirs(local, exist_ok=True)
        self.local = local
        self.remote = remote
        self.keep_local = keep_local
        self.retry = retry
        self.progress_bar = progress_bar
        self.max_workers = max_workers

    def upload(self, basename: str) -> None:
        """Publish the completed file ``local/basename``."""

    def check(self) -> None:
        """Raise the first failure of a background upload, if any."""

    def finish(self, index_basename: str = "index.json") -> None:
        """Wait for every upload and publish the index last."""

    def abort(self) -> None:
        """Stop background work after a failure; the destination keeps no index for unfinished work."""
