"""Move each finished shard file from an executor's staging folder to the destination, then delete it.

``MDSWriter`` writes a shard's file into its local folder and calls ``sink.upload(basename)`` from the
thread that stored it (the `ShardSink` protocol of ``streaming.format.sink``). ``UploadingSink`` is the
sink a task attempt gives its writer for destinations that are not a local filesystem: it uploads the
file through the storage layer right there and removes the local copy, so an executor holds at most one
shard file per writer thread on disk however large the partition is (#970), and an upload failure fails
the shard (and so the task) instead of surfacing later.
"""

from __future__ import annotations

import contextlib
import os

from streaming.storage.registry import storage_for
from streaming.storage.scratch import remove_scratch
from streaming.storage.url import join_url


class UploadingSink:
    """The `ShardSink` of one task attempt's ``MDSWriter``.

    Args:
        local: the writer's staging folder (removed by ``finish``/``abort``).
        remote: the attempt's folder at the destination.
    """

    def __init__(self, local: str, remote: str) -> None:
        self.local = local
        self.remote = remote
        self.storage = storage_for(remote)
        self.peak_bytes = 0

    def upload(self, basename: str) -> None:
        """Upload ``local/basename`` to ``remote/basename`` and delete the local file."""
        path = os.path.join(self.local, basename)
        self.peak_bytes = max(self.peak_bytes, _folder_bytes(self.local))
        self.storage.put(path, join_url(self.remote, basename))
        os.remove(path)

    def finish(self, index_basename: str) -> None:
        """Publish the attempt's index last (every shard was uploaded by its own thread), then drop the staging
        folder."""
        self.upload(index_basename)
        remove_scratch(self.local)

    def abort(self, error: BaseException) -> None:
        """Drop the staging folder; the task then removes whatever reached the destination and re-raises
        ``error``."""
        remove_scratch(self.local)


def _folder_bytes(folder: str) -> int:
    """Bytes of the files directly in ``folder`` (files vanishing meanwhile count as 0)."""
    total = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                total += entry.stat().st_size
    return total
