"""Whether a stream's remote is a Delta table, a folder holding ``_delta_log`` (read by
`streaming.dataset.delta_stream` instead of an MDS index), or a folder of Parquet files without either (read by
`streaming.dataset.parquet_stream`).

Kept apart from the streams themselves, which need pyarrow: every dataset asks this of its streams.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from streaming.format.index import get_index_basename
from streaming.storage.url import is_remote, join_url

if TYPE_CHECKING:
    from streaming.dataset.stream import Stream

#: The folder whose presence makes a stream's remote a Delta table.
DELTA_LOG = "_delta_log"
#: How the name of a data file of a Parquet folder ends.
PARQUET_SUFFIX = ".parquet"


def parquet_files(names: list[str]) -> list[str]:
    """The data files among a folder's root-relative ``names``, in path order: the ``.parquet`` files, but those
    with a hidden part (``_SUCCESS``, ``_temporary/``, ``.part-0.parquet.crc``: a writer's own, as Spark skips them)."""
    return sorted(
        name
        for name in names
        if name.endswith(PARQUET_SUFFIX) and not any(part.startswith(("_", ".")) for part in name.split("/"))
    )


def holds_delta_table(stream: Stream) -> bool:
    """Whether a stream's remote (with its split) is a folder holding ``_delta_log``, which makes it a Delta table.

    A local remote is looked at with ``lstat`` (a ``_delta_log`` that is a link does not count); a remote one is
    listed, only when no MDS index of it is cached in the stream's local folder. A remote that cannot be listed is
    not a table here: reading its index then says what is wrong.
    """
    if stream.remote is None:
        return False
    from streaming.storage.local import LocalStorage, local_path
    from streaming.storage.registry import storage_for

    try:
        if not is_remote(stream.remote) and isinstance(storage_for(stream.remote), LocalStorage):
            root = os.path.join(local_path(stream.remote), stream.split)
            return stat.S_ISDIR(os.lstat(os.path.join(root, DELTA_LOG)).st_mode)
        if os.path.exists(stream.local_path(get_index_basename())):
            return False
        root_url = join_url(stream.remote, stream.split) if stream.split else stream.remote
        return bool(storage_for(root_url).list(join_url(root_url, DELTA_LOG) + "/"))
    except (OSError, ValueError):
        return False


def holds_parquet_files(stream: Stream) -> bool:
    """Whether a stream's remote (with its split) is a folder of Parquet files: no MDS index (there, or cached in
    the stream's local folder), no ``_delta_log``, and at least one data file (`parquet_files`) below it.

    Asked after `holds_delta_table`; a remote one costs a look for its index and, without one, a listing. A remote
    that cannot be listed is not such a folder here: reading its index then says what is wrong.
    """
    if stream.remote is None:
        return False
    from streaming.storage.dataset_root import DatasetRoot
    from streaming.storage.local import LocalStorage, local_path
    from streaming.storage.registry import storage_for

    root_url = join_url(stream.remote, stream.split) if stream.split else stream.remote
    try:
        if not is_remote(stream.remote) and isinstance(storage_for(stream.remote), LocalStorage):
            root = os.path.join(local_path(stream.remote), stream.split)
            if not stat.S_ISDIR(os.lstat(root).st_mode) or os.path.lexists(os.path.join(root, get_index_basename())):
                return False
        elif os.path.exists(stream.local_path(get_index_basename())) or storage_for(root_url).exists(
            join_url(root_url, get_index_basename())
        ):
            return False
        names = DatasetRoot(root_url).list_relative()
    except (OSError, ValueError):
        return False
    return not any(name.startswith(DELTA_LOG + "/") for name in names) and bool(parquet_files(names))
