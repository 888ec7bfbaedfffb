"""Whether a stream's remote is a Delta table: a folder holding ``_delta_log`` (read by
`streaming.dataset.delta_stream` instead of an MDS index).

Kept apart from the Delta stream itself, which needs pyarrow: every dataset asks this of its streams.
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
