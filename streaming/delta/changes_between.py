"""What a table's versions ``start + 1 .. end`` changed: the window of commits, its Change Data Feed, and the rows
of the data files it added and removed.

The third of the package's three seams (`streaming.delta.snapshot`, `streaming.delta.scan`, `changes_between`), after
delta-kernel's ``TableChanges``. The window's commit files are read once (`read_window`), those the end
snapshot's own read of the log passed not at all; the feed and the changed
files are then read from that window, each file through the one per-file reader (`streaming.delta.scan.Scan`) with
the end version's schema and column mapping, so a column-mapped table's change reads only the files it touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from streaming.delta.errors import HistoryUnavailableError
from streaming.delta.history import TableWindow, read_log_window
from streaming.delta.row_ids import RowTracking
from streaming.delta.scan import CHANGE_TYPE, Scan
from streaming.delta.snapshot import Snapshot

#: Change Data Feed row kinds that add a row to the table, and those that take one away.
FEED_PLUS = ("insert", "update_postimage")
FEED_MINUS = ("delete", "update_preimage")


def read_window(end: Snapshot, start: int) -> TableWindow:
    """The commits of versions ``start + 1 ..`` ``end``'s version: those ``end``'s read of the log passed are
    reused, the older ones read from their commit files. The feed's setting and the schema at ``start`` come from
    that read too where it passed ``start`` or the version before the window's first metadata change (the settings
    are the same until then); else from the log at ``start`` while it is still there (else unknown, which the window
    allows for)."""
    window = read_log_window(
        end.read_text,
        start,
        end.version,
        feed_at_start=None,
        schema_at_start=None,
        table=end.uri,
        known=end.log.commits,
    )
    # The settings at ``start`` are those in effect until the window's first metadata change: where the snapshot's
    # read of the log began after ``start`` (a checkpoint newer than it), the version before that change may still
    # be one the read passed.
    changes = [commit.version for commit in window.commits if commit.metadata is not None]
    settled = min(changes) - 1 if changes else end.version
    feed, schema = end.feed_enabled_at(start), end.schema_string_at(start)
    if feed is None:
        feed, schema = end.feed_enabled_at(settled), end.schema_string_at(settled)
    if feed is None:
        try:
            held = Snapshot.open(end.uri, start)
        except HistoryUnavailableError:
            pass  # the version is gone from the log: its settings are unknown
        else:
            feed, schema = held.feed_enabled, held.schema_string
    return replace(window, feed_at_start=feed, schema_at_start=schema)


def changed_rows(
    end: Snapshot, window: TableWindow, columns: Sequence[str], tracking: RowTracking | None = None
) -> tuple[pa.Table, pa.Table]:
    """The rows of the ``dataChange`` files the window added, and of those it removed (`TableWindow.changed_files`),
    with ``columns`` as ``end``'s types; with ``tracking``, each with its stable row id."""
    added, removed = window.changed_files()
    scan = Scan(end, columns, tracking)
    return scan.rows(added), scan.rows(removed)


def feed_rows(end: Snapshot, window: TableWindow, columns: Sequence[str]) -> tuple[pa.Table, pa.Table]:
    """The Change Data Feed of the window as PROTOCOL.md defines it: a commit's change data files where it wrote
    them, else the rows of the files it added (inserts) and removed (deletes) with ``dataChange``, deletion vectors
    applied. Returns the rows it adds (inserts, post-images) and those it takes away (deletes, pre-images)."""
    scan = Scan(end, columns)
    kinds = Scan(end, columns, change_type=True)
    plus, minus = [scan.empty()], [scan.empty()]
    for commit in window.commits:
        if commit.changes:
            rows = kinds.rows([(action, commit.version) for action in commit.changes])
            kind = rows.column(CHANGE_TYPE)
            plus.append(rows.filter(pc.is_in(kind, value_set=pa.array(FEED_PLUS))).drop([CHANGE_TYPE]))
            minus.append(rows.filter(pc.is_in(kind, value_set=pa.array(FEED_MINUS))).drop([CHANGE_TYPE]))
            continue
        plus.append(scan.rows([(action, commit.version) for action in commit.adds if action.data_change]))
        minus.append(scan.rows([(action, commit.version) for action in commit.removes if action.data_change]))
    return pa.concat_tables(plus), pa.concat_tables(minus)
