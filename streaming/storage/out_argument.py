"""The one parser of an ``out`` argument: where a writer, a merge or a converter puts a dataset.

Upstream accepts three spellings of ``out``, and so does every caller here: a local directory, a remote URL,
or a ``(local, remote)`` pair. `parse_out` turns each into an `Output`; `normalize_root` gives the single
canonical spelling of a dataset root that the Spark converters work with.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, NamedTuple

from streaming.storage.registry import volumes_via_api
from streaming.storage.scratch import make_scratch
from streaming.storage.url import is_remote, split_url

UNNAMED_LOCAL_PREFIX = "mds-out-"  # the scratch folders that stage an `out` given as a remote only


class Output(NamedTuple):
    """Where a dataset goes: a local directory and/or a remote root (either may be None, not both)."""

    local: str | None
    remote: str | None


def is_remote_root(out: str) -> bool:
    """A URL, or a ``/Volumes/...`` path whose volume is not mounted here (reached through the Files API)."""
    return is_remote(out) or volumes_via_api(out)


def parse_out(out: Any) -> Output:
    """Split ``out`` (a directory, a URL or a ``(local, remote)`` pair); an empty part of a pair is None.

    A local part is returned as a filesystem path (``file://`` removed, ``~`` expanded).
    """
    if isinstance(out, (tuple, list)):
        if len(out) != 2:
            raise ValueError(f"`out` must be a directory, a URL or a (local, remote) pair, got {out!r}.")
        local, remote = out
        return Output(_local_dir(local) if local else None, remote or None)
    if not isinstance(out, str) or not out:
        raise ValueError(f"`out` must be a directory, a URL or a (local, remote) pair, got {out!r}.")
    if is_remote_root(out):
        return Output(None, out)
    return Output(_local_dir(out), None)


def local_directory(local: str | None, *, exist_ok: bool, clear: bool) -> str:
    """The local directory of an output, created: a fresh scratch folder when ``local`` is None.

    A non-empty ``local`` is refused unless ``exist_ok``; with ``clear`` its old contents are then removed. A
    scratch folder (`streaming.storage.scratch`) lives while this process does: its owner removes it with
    ``remove_scratch``, and a killed owner's is removed by the next process that makes one.
    """
    if local is None:
        return make_scratch(UNNAMED_LOCAL_PREFIX)
    if os.path.isdir(local) and os.listdir(local):
        if not exist_ok:
            action = "replace it" if clear else "write into it"
            raise FileExistsError(f"Directory is not empty: {local} (pass exist_ok=True to {action}).")
        if clear:
            shutil.rmtree(local)
    os.makedirs(local, exist_ok=True)
    return local


def normalize_root(out: str) -> str:
    """A dataset root as one string: an absolute local path, or a remote URL without a trailing slash."""
    if not isinstance(out, str) or not out:
        raise TypeError(f"`out` must be a local path or a URL string, got {out!r}.")
    if is_remote(out):
        return out.rstrip("/")
    return os.path.abspath(_local_dir(out))


def _local_dir(path: str) -> str:
    return os.path.expanduser(split_url(path).key if split_url(path).scheme == "file" else path)
