"""A driver-side progress bar for a conversion: tasks done, rows and bytes written.

Spark Connect gives the driver no task events, so progress is read from the destination itself: a task
attempt writes its own ``index.json`` last, and a background thread polls the run's folder for new ones
(every second on a local filesystem, every five seconds on object stores). The bar is ``tqdm.auto``, so it
renders as a widget in notebooks; when stderr is not a terminal (job logs) it prints a plain line at most
every 30 seconds instead of redrawing.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from typing import Any

from tqdm.auto import tqdm

from streaming.format.index import INDEX_BASENAME, stored_file
from streaming.format.runs import written_by_run
from streaming.storage.dataset_root import DatasetRoot


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


class Progress:
    """Show a run's progress until ``close``.

    Args:
        destination: the dataset root.
        run: the run id.
        total: number of tasks, if known.
        enabled: False to show nothing.
        flat: the run's attempt folders lie directly below the root (`streaming.format.runs`).
    """

    def __init__(
        self, destination: DatasetRoot, run: str, total: int | None, enabled: bool = True, flat: bool = False
    ) -> None:
        self.destination = destination
        self.run = run
        self.flat = flat
        self.enabled = enabled
        self.rows = 0
        self.bytes = 0
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.bar: Any = None
        if not enabled:
            return
        interactive = sys.stderr.isatty()
        self.bar = tqdm(
            total=total,
            desc="dataframe_to_mds",
            unit="task",
            dynamic_ncols=interactive,
            mininterval=0.5 if interactive else 30.0,
            file=sys.stderr,
        )
        self._interval = 1.0 if destination.is_local else 5.0
        self._thread = threading.Thread(target=self._poll, name="mds-progress", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self._interval):
            with contextlib.suppress(Exception):
                self.refresh()

    def refresh(self) -> None:
        """Count attempts that finished since the last look."""
        listing = self.destination.list_relative("" if self.flat else self.run)
        for relative in (name for name in listing if written_by_run(name, self.run, self.flat)):
            if not relative.endswith("/" + INDEX_BASENAME) or relative in self._seen:
                continue
            text = self.destination.read_text(relative)
            if text is None:
                continue
            self._seen.add(relative)
            shards = json.loads(text).get("shards", [])
            self._advance(
                1,
                sum(s.get("samples", 0) for s in shards),
                sum(stored_file(s)["bytes"] for s in shards),
            )

    def _advance(self, tasks: int, rows: int, size: int) -> None:
        self.rows += rows
        self.bytes += size
        if self.bar is not None:
            self.bar.set_postfix_str(f"rows={self.rows:,} bytes={_human(self.bytes)}", refresh=False)
            self.bar.update(tasks)

    def close(self, tasks: int | None = None, rows: int | None = None, size: int | None = None) -> None:
        """Stop polling and show the final figures (those Spark reported, when given)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.bar is None:
            return
        if tasks is not None:
            self.bar.total = tasks
            self.bar.n = tasks
            self.rows, self.bytes = 0, 0
            self._advance(0, rows or 0, size or 0)
        self.bar.close()
