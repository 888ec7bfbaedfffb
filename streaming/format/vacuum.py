"""`vacuum(out, retention=...)`: delete the files of a dataset that no index references, once they are old.

Delta Lake's VACUUM semantics, applied to an MDS dataset on any store:

* a file is *referenced* when the dataset's `index.json`, the newest commit of its commit log
  (`streaming.format.commit_log`, ``_mds_log/``) or a commit made within the retention names it (any of
  a shard's `raw_data`, `zip_data`, `raw_meta`, `zip_meta`); the index itself, the commit files and the
  conversion record `mds_conversion.json` are kept, and so are the `index.json` files of sub-folders whose
  shards the root index names (a merged dataset's parts). Without a root `index.json` or log, every
  `index.json` below `out` counts as a dataset and keeps its own files. A vacuum between a commit and its
  checkpoint therefore never deletes a committed shard;
* a file is deleted only when it is not referenced **and** was last modified more than `retention` ago, so
  a writer still in flight (its shards are not in any index yet, but they are new) never loses a file;
* like Delta, a retention shorter than `DEFAULT_RETENTION` (7 days) is refused unless
  `retention_check=False`: a shorter one is only safe when no writer can be running.

Left-overs this removes: shards of failed or speculative Spark attempts, crashed runs' folders, a replaced
dataset's files that an interrupted overwrite left, stale `*.tmp`/`*.part` files. `dry_run=True` lists what
would go without deleting anything.
"""

from __future__ import annotations

import os
import posixpath
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from streaming.format import commit_log
from streaming.format.commit_log import LOG_FOLDER, METADATA_BASENAME
from streaming.format.index import INDEX_BASENAME, MAX_INDEX_BYTES, parse_index, shard_files
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.url import is_remote

DEFAULT_RETENTION = 7 * 24 * 3600.0
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass
class VacuumResult:
    """What a vacuum found and did. Paths are relative to the dataset root, `/`-separated."""

    root: str
    retention_seconds: float
    dry_run: bool
    deleted: list[str] = field(default_factory=list)
    deleted_bytes: int = 0
    kept_referenced: int = 0
    kept_recent: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "retention_seconds": self.retention_seconds,
            "dry_run": self.dry_run,
            "deleted": self.deleted,
            "deleted_bytes": self.deleted_bytes,
            "kept_referenced": self.kept_referenced,
            "kept_recent": self.kept_recent,
        }


def parse_retention(retention: float | int | str) -> float:
    """Seconds from a number of seconds or a string such as `"7d"`, `"168h"`, `"30m"`, `"0s"`, `"2w"`."""
    if isinstance(retention, (int, float)) and not isinstance(retention, bool):
        seconds = float(retention)
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(retention).lower())
        if match is None:
            raise ValueError(
                f"Invalid retention {retention!r}: give seconds or a number with a unit s, m, h, d or w "
                f"(e.g. '7d', '168h', '30m')."
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0:
        raise ValueError(f"retention must not be negative, got {retention!r}.")
    return seconds


def _read_index(root: DatasetRoot, relative: str) -> list[dict[str, Any]]:
    """The checked shard entries of one index below the root (its basenames are validated as readers do)."""
    text = root.read_text(relative, MAX_INDEX_BYTES)
    where = root.child(relative)
    if text is None:
        raise FileNotFoundError(f"{where} vanished while vacuuming; run vacuum again.")
    try:
        return parse_index(text, where)
    except ValueError as err:
        raise ValueError(f"{err} Refusing to vacuum (fix or rebuild the index first).") from None


def _referenced(shards: list[dict[str, Any]], folder: str) -> set[str]:
    """Root-relative paths of the files one index names (its basenames are relative to its `folder`)."""
    return {posixpath.join(folder, info["basename"]) for shard in shards for _, info in shard_files(shard)}


def referenced_files(root: str | DatasetRoot, listing: list[str], since: float = 0.0) -> set[str]:
    """The root-relative paths that vacuum keeps whatever their age (see the module docstring); commits
    made after ``since`` keep their files too."""
    location = root if isinstance(root, DatasetRoot) else DatasetRoot(root)
    indexes = [path for path in listing if posixpath.basename(path) == INDEX_BASENAME]
    logged = commit_log.referenced_files(location, since) if any(map(_in_log, listing)) else set()
    if INDEX_BASENAME in listing or logged:
        keep = logged | {INDEX_BASENAME}
        if INDEX_BASENAME in listing:
            keep |= _referenced(_read_index(location, INDEX_BASENAME), "")
        for path in indexes:
            folder = posixpath.dirname(path)
            if folder and _referenced(_read_index(location, path), folder) <= keep:
                keep.add(path)
    else:
        keep = set(indexes)
        for path in indexes:
            keep |= _referenced(_read_index(location, path), posixpath.dirname(path))
    if METADATA_BASENAME in listing:
        keep.add(METADATA_BASENAME)
    return keep


def _in_log(path: str) -> bool:
    return path.startswith(f"{LOG_FOLDER}/")


def vacuum(
    out: str,
    retention: float | int | str = DEFAULT_RETENTION,
    *,
    dry_run: bool = False,
    retention_check: bool = True,
    max_workers: int = 8,
    progress: Callable[[int], object] | None = None,
) -> VacuumResult:
    """Delete files below `out` that no index references and that are older than `retention`.

    Args:
        out: the dataset root: a local path or any URL the storage layer serves.
        retention: minimum age of a deleted file: seconds, or a string such as `"7d"` or `"24h"`.
        dry_run: only list what would be deleted.
        retention_check: refuse a retention shorter than 7 days (Delta's safety check); pass False when no
            writer can be running on this dataset.
        max_workers: threads that look up ages and delete files.
        progress: called with 1 for each unreferenced file whose age was looked up (e.g. a tqdm bar's update).

    Returns:
        A :class:`VacuumResult` (`deleted` lists what was, or with `dry_run` would be, deleted).
    """
    seconds = parse_retention(retention)
    if retention_check and seconds < DEFAULT_RETENTION:
        raise ValueError(
            f"Refusing to vacuum {out} with a retention of {seconds:.0f} s, shorter than the safe default of "
            f"{DEFAULT_RETENTION / 86400:.0f} days: a writer still running could lose files it has not "
            f"published yet. If no writer can be running, pass retention_check=False "
            f"(command line: --no-retention-check)."
        )
    root = out.rstrip("/") if is_remote(out) else os.path.abspath(os.path.expanduser(out.removeprefix("file://")))
    # Every path below goes through the dataset root: checked by the one path rule, and on a local root
    # deleted through descriptors that follow no link (a folder swapped for one after the listing included).
    location = DatasetRoot(root)
    listing = location.list_relative()
    cutoff = time.time() - seconds
    keep = referenced_files(location, listing, cutoff)
    result = VacuumResult(root, seconds, dry_run, kept_referenced=len(keep & set(listing)))
    candidates = [path for path in listing if path not in keep]

    def age_and_size(path: str) -> tuple[str, float, int]:
        return path, location.modified(path), location.size(path) or 0  # a link, FIFO or device has no size

    with ThreadPoolExecutor(max(1, max_workers), thread_name_prefix="mds-vacuum") as pool:
        doomed = []
        for path, modified, size in pool.map(age_and_size, candidates):
            if progress is not None:
                progress(1)
            if modified < cutoff:
                doomed.append(path)
                result.deleted_bytes += size
            else:
                result.kept_recent.append(path)
        result.deleted = sorted(doomed)
        result.kept_recent.sort()
        if not dry_run:
            list(pool.map(lambda path: location.storage.delete(location.child(path)), result.deleted))
    if not dry_run and location.is_local:
        location.tree.remove_empty_folders()
    return result
