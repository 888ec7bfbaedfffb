"""The ``merge_index=False`` layout: upstream's one sub-directory per partition, each a dataset of its own.

MosaicML Streaming writes ``<out>/<task attempt id>/`` (shards and an ``index.json``) per partition and, with
``merge_index=False``, nothing at the root, so users read the sub-directories as streams or merge them later
(``merge_index(out)``). Here every task attempt writes ``<out>/<run>-part-<partition>-attempt-<id>/``
(`streaming.convert.runs.partition_folder`; the run prefix keeps runs and retries apart); once the job is
done the driver deletes the folders of the attempts the engine did not report as successful, so exactly one
folder per non-empty partition is left, and after a failed job it deletes every folder of the run.
``mode="overwrite"`` also deletes everything else below the root (the previous dataset, its merged index).
"""

from __future__ import annotations

import contextlib

from streaming.convert.attempt import Attempt
from streaming.convert.commit import first_per_partition
from streaming.convert.runs import partition_folder_prefix
from streaming.storage.dataset_root import DatasetRoot


def _top_folder(relative: str) -> str:
    return relative.split("/", 1)[0]


def _of_run(relative: str, run: str) -> bool:
    return "/" in relative and _top_folder(relative).startswith(partition_folder_prefix(run))


def publish_partitions(destination: DatasetRoot, run: str, attempts: list[Attempt], mode: str) -> None:
    """Keep the successful attempts' folders; delete the run's others (and, for an overwrite, all else)."""
    kept = {attempt.directory for attempt in first_per_partition(attempts) if attempt.directory}
    doomed = [
        relative
        for relative in destination.list_relative()
        if _top_folder(relative) not in kept and (mode == "overwrite" or _of_run(relative, run))
    ]
    destination.delete(doomed)


def discard_partitions(destination: DatasetRoot, run: str) -> None:
    """After a failed job: delete every folder the run wrote (quietly: the job's own error is what matters)."""
    with contextlib.suppress(Exception):
        destination.delete([relative for relative in destination.list_relative() if _of_run(relative, run)])
