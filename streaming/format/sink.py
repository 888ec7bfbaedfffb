"""`ShardSink`: the contract between a shard writer and whatever carries its files to their destination.

A writer is given its sink when it is built. It writes each file completely into ``sink.local`` and then
calls ``sink.upload(basename)``, possibly from several shard threads at once. When every shard is stored
it writes ``index.json`` into ``sink.local`` and calls ``sink.finish(index_basename)``: the sink makes sure
every earlier file reached the destination and only then publishes the index, so no reader ever sees an
index naming a missing file. If anything fails instead (a shard that cannot be encoded, stored or
uploaded, or the index itself), the writer calls ``sink.abort(error)`` with that error and re-raises it:
``abort`` stops the sink's work, may add notes to ``error``, and must not raise, so the storage error is
what the caller sees.

Implementations: `streaming.storage.shard_uploader.ShardUploader` (background uploads, the default),
`streaming.convert.upload_sink.UploadingSink` (one conversion task attempt: upload and delete each shard at once) and
the upstream uploaders of `streaming.compat.cloud_uploaders` (`CloudUploader` and its subclasses).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ShardSink(Protocol):
    """Where a writer's files go."""

    @property
    def local(self) -> str:
        """The directory the writer writes every file into."""

    @property
    def remote(self) -> str | None:
        """The destination URL the sink copies the files to, or None when ``local`` is the destination."""

    def upload(self, basename: str) -> None:
        """Take the complete file ``local/basename``; raise if it (or an earlier file) cannot be stored."""

    def finish(self, index_basename: str) -> None:
        """Wait until every file passed to `upload` is stored, then publish ``local/index_basename`` last."""

    def abort(self, error: BaseException) -> None:
        """Give up after ``error``: stop pending work and publish no index. Never raises."""
