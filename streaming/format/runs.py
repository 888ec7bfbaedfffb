"""The names of a conversion's folders: run ids, attempt and partition folders, incremental runs' folders.

Every writer names its folders here and every reader of a destination (the commit's leftover cleanup,
`mode="error"`'s emptiness check, the incremental job's version lookup, a training job telling whether a
checkpoint's dataset can change under it: `streaming.format.dataset_version`) parses them here, so a name and its
parser cannot drift apart. Layout below a dataset root::

    <run>/part-<partition:05>-attempt-<attempt>/...        a task attempt of a run (nested)
    <run>-part-<partition:05>-attempt-<attempt>/...        the same, flat: upstream's one folder per partition
    increments/v<version:08>-<hex>/<run>/part-.../...      one run of incremental_to_mds

``<run>`` is the run id: its UTC start time (so runs sort by age) and a random suffix.
"""

from __future__ import annotations

import re
import secrets
import time

INCREMENTS = "increments"
_RUN_ID = r"\d{8}T\d{6}Z-[0-9a-f]{6}"
_LEFTOVER = re.compile(rf"^(?:{_RUN_ID}(?:-part-[^/]+)?|{INCREMENTS}/v\d+-[0-9A-Za-z]+)/")
_INCREMENT = re.compile(rf"^{INCREMENTS}/v(\d+)(?:-[0-9a-f]+)?/")


def new_run_id() -> str:
    """A new run id: UTC time to the second and six random hex digits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def attempt_folder(run: str, partition: int, attempt: int) -> str:
    """A task attempt's folder relative to the dataset root (below its run's folder)."""
    return f"{run}/part-{partition:05d}-attempt-{attempt}"


def partition_folder(run: str, partition: int, attempt: int) -> str:
    """A task attempt's folder directly below the root, in the flat layout (upstream's)."""
    return f"{run}-part-{partition:05d}-attempt-{attempt}"


def attempt_folder_of(relative: str, flat: bool) -> str:
    """The attempt folder (nested: ``<run>/<attempt>``; flat: its top folder) a root-relative path lies in."""
    return "/".join(relative.split("/", 2)[: 1 if flat else 2])


def written_by_run(relative: str, run: str, flat: bool) -> bool:
    """Whether a root-relative path lies in one of ``run``'s attempt folders."""
    if flat:
        return "/" in relative and relative.startswith(f"{run}-part-")
    return relative.startswith(f"{run}/")


def new_increment_folder(version: int) -> str:
    """The folder of a new incremental run bringing a dataset up to table ``version``."""
    return f"{INCREMENTS}/v{version:08d}-{secrets.token_hex(4)}"


def increment_version(relative: str) -> int | None:
    """The table version of the incremental run a root-relative path lies in, or None if it lies in none."""
    match = _INCREMENT.match(relative)
    return int(match.group(1)) if match else None


def in_run_folder(relative: str) -> bool:
    """Whether a root-relative path lies in some run's own folder (a crashed run's leftovers lie there)."""
    return _LEFTOVER.match(relative) is not None
