"""Hand finished shard files to their destination: a local directory, plus a remote store in the background.

The default `ShardSink` of every writer (the protocol is in `streaming.format.sink`). Writers write every
file into ``ShardUploader.local`` and call ``upload(basename)`` once a file is complete; remote uploads then
run on ``max_workers`` threads. ``finish(index_basename)`` waits for them and publishes the index last, so a
reader never sees an index naming a missing shard.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from streaming.storage.download import PERMANENT
from streaming.storage.out_argument import local_directory, parse_out
from streaming.storage.registry import storage_for
from streaming.storage.retry import call_with_retry
from streaming.storage.scratch import keep_scratch, remove_scratch
from streaming.storage.url import join_url

if TYPE_CHECKING:
    from tqdm import tqdm


class ShardUploader:
    """Owns the output location of one writer.

    Args:
        out: a local directory, a remote URL, or a ``(local, remote)`` pair.
        index_basename: the name of the dataset's index (given by the format layer, which owns it); with
            ``exist_ok`` the remote's old index is deleted before any file is sent.
        keep_local: keep local copies after upload (only meaningful with a remote). Without a local part in
            ``out`` they are staged in a scratch folder (`streaming.storage.scratch`): a finished writer keeps it
            only with this, a failed one always keeps it (the error names it), a SIGKILLed one's is swept.
        exist_ok: allow a non-empty destination. Old local contents are removed first; a remote that
            already holds objects is written over, and its old index is deleted before any shard is sent.
            Without it, a non-empty local directory or remote prefix raises FileExistsError.
        max_workers: background upload threads (default: Python's thread-pool default).
        retry: total upload attempts per file.
        progress_bar: show upload progress.
    """

    def __init__(
        self,
        out: str | tuple[str, str],
        *,
        index_basename: str,
        keep_local: bool = False,
        exist_ok: bool = False,
        max_workers: int | None = None,
        retry: int = 2,
        progress_bar: bool = False,
    ) -> None:
        if retry < 1:
            raise ValueError(f"retry (total upload attempts) must be at least 1, got {retry}.")
        local, remote = parse_out(out)
        if remote is not None:  # first, so that a refused remote leaves no local folder behind
            self._check_remote(remote, exist_ok, index_basename)
        # Without a local part the files are staged in a scratch folder, so that a SIGKILLed writer cannot leak it.
        self._staged_in_scratch = local is None
        self.local = local_directory(local, exist_ok=exist_ok, clear=True)
        self.remote = remote
        self.keep_local = keep_local
        self.retry = retry
        self.progress_bar = progress_bar
        self.max_workers = max_workers
        self._failure: BaseException | None = None
        self._futures: list[Future] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._progress: tqdm | None = None

    def _check_remote(self, remote: str, exist_ok: bool, index_basename: str) -> None:
        if exist_ok:
            index = join_url(remote, index_basename)
            storage_for(index).delete(index)
            return
        existing = storage_for(remote).list(remote)
        if existing:
            raise FileExistsError(
                f"Remote {remote} already holds {len(existing)} object(s), e.g. {existing[0]} "
                "(pass exist_ok=True to write over them)."
            )

    def upload(self, basename: str) -> None:
        """Publish the completed file ``local/basename``: queued for upload when there is a remote."""
        if self.remote is None:
            return
        self.check()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="mds-upload")
            if self.progress_bar:
                from tqdm import tqdm

                self._progress = tqdm(total=0, unit="file", desc=f"Uploading to {self.remote}")
        with self._lock:
            if self._progress is not None:
                self._progress.total = (self._progress.total or 0) + 1
                self._progress.refresh()
            self._futures.append(self._pool.submit(self._upload_one, basename))

    def _upload_one(self, basename: str) -> None:
        if self._failure is not None:
            return
        try:
            self._put(basename)
        except BaseException as exc:
            with self._lock:
                if self._failure is None:
                    self._failure = exc
            raise
        if self._progress is not None:
            with self._lock:
                self._progress.update(1)

    def _put(self, basename: str) -> None:
        local_path = os.path.join(self.local, basename)
        url = join_url(self.remote, basename)  # type: ignore[arg-type]  # only called when there is a remote
        call_with_retry(lambda: storage_for(url).put(local_path, url), self.retry, permanent=PERMANENT)
        if not self.keep_local:
            os.unlink(local_path)

    def check(self) -> None:
        """Raise the first failure of a background upload, if any."""
        if self._failure is not None:
            raise self._failure

    def _wait(self) -> None:
        with self._lock:
            futures, self._futures = self._futures, []
        for future in futures:
            if not future.cancelled():
                future.exception()

    def finish(self, index_basename: str) -> None:
        """Wait for every upload, then publish the index last; drop the local copy unless `keep_local`.

        On failure the error is raised with a note saying where the files are kept (a later `abort` with the
        same error does not repeat it).
        """
        try:
            self._wait()
            self.check()
            if self.remote is None:
                return
            if not os.path.isfile(os.path.join(self.local, index_basename)):
                raise FileNotFoundError(
                    f"Cannot publish the index: {os.path.join(self.local, index_basename)} does not exist."
                )
            self._put(index_basename)
            if self._staged_in_scratch and self.keep_local:
                keep_scratch(self.local)
            elif self._staged_in_scratch:
                remove_scratch(self.local)
            elif not self.keep_local:
                shutil.rmtree(self.local, ignore_errors=True)
        except Exception as err:
            self._keep_for_the_user(err)
            raise
        finally:
            self._shutdown()

    def _keep_for_the_user(self, err: BaseException) -> None:
        """After a failure, keep the local files for good and say where in a note on ``err`` (once)."""
        if self.remote is None:
            return
        if self._staged_in_scratch:  # the note promises the files: no later sweep may take them
            keep_scratch(self.local)
        note = (
            f"Nothing written is lost: the files are kept in {self.local}. {self.remote} has no "
            f"index, so no reader sees a partial dataset there."
        )
        if note in getattr(err, "__notes__", ()):
            return
        if sys.version_info >= (3, 11):
            err.add_note(note)
        else:  # no add_note before 3.11: set the attribute it fills (unknown to typeshed's 3.10 stubs)
            err.__notes__ = [*getattr(err, "__notes__", ()), note]  # type: ignore[attr-defined]

    def abort(self, error: BaseException) -> None:
        """Stop background work after a failure; the remote is left without an index, the local copy is kept."""
        with self._lock:
            futures, self._futures = self._futures, []
        for future in futures:
            future.cancel()
        self._shutdown()
        self._keep_for_the_user(error)

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._progress is not None:
            self._progress.close()
            self._progress = None
