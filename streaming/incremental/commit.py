"""A run's one commit: its shards and the table version it reached, unless another run moved the dataset.

The commit log's create-only commit (`streaming.format.commit_log`) decides between concurrent runs: a run that
finds a newer commit than the one it started from checks which version that commit holds, and fails if it is
not the one this run started from, so no change is applied twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.format import commit_log
from streaming.storage.dataset_root import DatasetRoot


def commit_run(
    destination: DatasetRoot,
    table: str,
    held: int | None,
    target: int,
    version_in: Callable[[commit_log.Snapshot], int | None],
    base: commit_log.Snapshot,
    operation: str,
    added: list[dict[str, Any]],
    record: dict[str, Any],
    *,
    lost: str,
    removed: list[str] | None = None,
    audit: dict[str, Any] | None = None,
    reread: bool = False,
) -> None:
    """Commit ``added`` (and ``removed``) on top of ``base`` (the committed state the run started from) with the
    table version ``target``, then publish.

    ``version_in`` reads the table version a state holds (`streaming.incremental.dataset_state.held_version`,
    handed over by the run so that the walk from the entry point meets that module once). ``lost`` ends the error
    of a run another run overtook (what became of this run's work); ``reread`` checks the newest state once before
    committing, for a dataset a legacy writer (no commit log) may have moved.
    """

    def still_held(newer: commit_log.Snapshot) -> None:
        now_held = version_in(newer)
        if now_held != held:
            raise RuntimeError(
                f"Another run updated {destination.url} (it now holds version {now_held} of {table!r}, "
                f"this run started from {held}); {lost}"
            )

    if reread:
        still_held(commit_log.read_snapshot(destination))
    state = commit_log.commit(
        destination,
        operation,
        added,
        base=base,
        record=record,
        check=still_held,
        source_versions={table: target},
        removed=removed,
        audit=audit,
    )
    commit_log.publish_checkpoint(destination, state)
