"""The change model: what a window of table versions added and took away, and how it was read.

A run reads the change cheapest way first (see `streaming.incremental.job`): nothing when no commit of the
window changed data, the Change Data Feed, the changed files, both versions whole. Every way gives the same rows,
netted by row identity; a window whose history is gone raises `IncrementalHistoryError`, naming the first
version missing and the way out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streaming.delta.errors import FilesNotReadableError, HistoryUnavailableError
from streaming.delta.history import TableWindow
from streaming.incremental.reader import TableReader

logger = logging.getLogger(__name__)

#: How a run found its rows (`IncrementResult.method`).
METHODS = (
    "up_to_date",
    "snapshot",
    "no_data_change",
    "change_data_feed",
    "snapshot_diff",
    "full_snapshot_diff",
    "resync",
)


class IncrementalHistoryError(RuntimeError):
    """The change between the version a dataset holds and the target can no longer be read from the table.

    Attributes:
        version: the first table version whose change is missing.
    """

    def __init__(self, message: str, version: int) -> None:
        super().__init__(message)
        self.version = version


@dataclass(frozen=True)
class Change:
    """What a run applies to a dataset.

    Attributes:
        added: the rows to add (an Arrow table or a DataFrame, as the reader gives them; None: none).
        method: how they were read, one of `METHODS`.
        removed_count: how many rows the change took away (what an append run reports and keeps).
        removed_rows: the rows the change took away, where the run asked for them (a mirror run removes them).
    """

    added: Any
    method: str
    removed_count: int = 0
    removed_rows: Any = None


def read_change(
    source: TableReader,
    table: str,
    held: int,
    names: list[str],
    encodings: Mapping[str, str],
    change_data_feed: bool | None,
    *,
    removed_rows: bool = False,
) -> Change:
    """The change of versions ``held + 1 ..`` the reader's version, read the cheapest way that applies; with
    ``removed_rows``, the rows it took away themselves (a mirror run), else their count."""

    def netted(pair: tuple[Any, Any], method: str) -> Change:
        plus, minus = pair
        if removed_rows:
            added, removed = source.net_rows(plus, minus, encodings)
            return Change(added, method, removed_rows=removed)
        added, count = source.net(plus, minus, encodings)
        return Change(added, method, removed_count=count)

    window: TableWindow | None = None
    missing: HistoryUnavailableError | None = None
    try:
        window = source.window(held)
    except HistoryUnavailableError as err:
        missing = err
    if window is not None and not window.changes_data:
        return Change(None, "no_data_change")
    usable, why_not = _feed_usable(window, missing)
    if change_data_feed and not usable:
        raise ValueError(
            f"change_data_feed=True but the Change Data Feed of {table!r} cannot give versions {held + 1}.."
            f"{source.version}: {why_not}. Choices: change_data_feed=None to read those versions' changed files."
        )
    if usable and window is not None and change_data_feed is not False:
        try:
            return netted(source.feed(window, names), "change_data_feed")
        except FilesNotReadableError as err:
            if change_data_feed:  # the feed is there, this reader cannot read it right: not a history problem
                raise ValueError(
                    f"change_data_feed=True but the Change Data Feed of {table!r} cannot be read for versions "
                    f"{held + 1}..{source.version} with this reader: {err}. Choices: change_data_feed=None to "
                    f"read those versions' changed files."
                ) from None
            logger.info("incremental_to_mds: reading the changed files of %s, not its feed: %s", table, err)
        except Exception as err:
            if change_data_feed:
                raise history_error(table, held, source.version, err, held + 1) from err
            logger.warning(
                "incremental_to_mds: the Change Data Feed of %s cannot be read for versions %d..%d (%s); "
                "reading the changed files instead.",
                table,
                held + 1,
                source.version,
                str(err).splitlines()[0] if str(err) else type(err).__name__,
            )
    if window is not None:
        try:
            return netted(source.files(window, names), "snapshot_diff")
        except FilesNotReadableError as err:
            logger.info("incremental_to_mds: reading both versions of %s whole: %s", table, err)
        except HistoryUnavailableError as err:
            missing = err
    try:
        return netted(source.full(held, names), "full_snapshot_diff")
    except HistoryUnavailableError as err:
        cause = missing or err
        version = cause.version if cause.version is not None else held + 1
        raise history_error(table, held, source.version, cause, version) from err


def _feed_usable(window: TableWindow | None, missing: HistoryUnavailableError | None) -> tuple[bool, str]:
    """Whether the Change Data Feed gives the window's change, and if not, why."""
    if window is None:
        return False, f"the table's history is incomplete ({missing})"
    if not window.feed_enabled_throughout():
        return False, "delta.enableChangeDataFeed was not true at every one of those versions"
    replaced = window.replacements()
    if replaced:
        return False, f"{', '.join(replaced)} replaced the table"
    changed = window.schema_changes()
    if changed:
        return False, f"{', '.join(changed)} changed the table's schema"
    return True, ""


def history_error(table: str, held: int, target: int, cause: BaseException, version: int) -> IncrementalHistoryError:
    """The error of a run whose change is gone: the first version missing and the ways out."""
    reason = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return IncrementalHistoryError(
        f"The change of {table!r} from version {held} (what the dataset holds) to version {target} can no longer "
        f"be read: {reason}. Version {version} is the first one missing. Way out: "
        f"incremental_to_mds({table!r}, out, resync=True) appends the rows of version {target} that the dataset "
        f"does not already hold, compared with the dataset's own rows (it reads the whole dataset and table "
        f"once); or rebuild with dataframe_to_mds({table!r}, out, mode='overwrite').",
        version,
    )
