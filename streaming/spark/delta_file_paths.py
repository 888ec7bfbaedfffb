"""What Spark's Delta reader says of a version's data files, and what it cannot say.

The incremental job finds a window's changed files with Spark (a table by name has no log to read) by setting two
versions' ``inputFiles()`` against each other, then reads their rows through the ``_metadata.file_path`` column.
Two facts of Delta Lake's reader decide whether that is right:

* the two name a file in different spellings: ``inputFiles()`` gives the file's path as text (a partition folder
  ``p=a b`` or, Hive-escaped, ``p=x%3Ay``), ``_metadata.file_path`` the same path as a URI, percent-encoded once
  more (``p=a%20b``, ``p=x%253Ay``). `metadata_path_key` decodes the URI and `input_path_key` takes the text, so
  both give one key;
* a DELETE, UPDATE or MERGE on a table with deletion vectors changes rows inside a file that stays, under the same
  path, with a new vector (``remove(P)`` and ``add(P, vector)`` in one commit), and a RESTORE may put an older
  vector back: a diff of paths sees nothing. `versions_changed_in_place` names the versions of ``DESCRIBE
  HISTORY`` that did (or may have) so; their change is read from both versions whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Operations that change rows through deletion vectors when the table has them (Delta's operation names).
_VECTOR_WRITERS = frozenset({"DELETE", "UPDATE", "MERGE"})


def input_path_key(path: str) -> str:
    """A data file's key from ``inputFiles()``: its path, with a local ``file:`` scheme dropped."""
    return re.sub(r"^file:/+", "/", path)


def metadata_path_key(column: Any) -> Any:
    """A data file's key from the ``_metadata.file_path`` column (a URI): the same as `input_path_key` gives.

    ``url_decode`` decodes ``%XX`` as UTF-8, as a URI path is decoded, but also reads ``+`` as a space (form
    encoding): a literal ``+`` is encoded first, so that it comes back as itself."""
    from pyspark.sql import functions as F

    local = F.regexp_replace(column, "^file:/+", "/")
    return F.url_decode(F.replace(local, F.lit("+"), F.lit("%2B")))


def versions_changed_in_place(history: Iterable[Mapping[str, Any]]) -> set[int]:
    """The versions of ``DESCRIBE HISTORY`` rows whose change a diff of file paths may miss: a commit that added,
    removed or updated a deletion vector, a DELETE, UPDATE or MERGE whose metrics are not recorded, and any
    RESTORE (which records no deletion vector counts)."""
    found = set()
    for row in history:
        operation = str(row["operation"] or "").upper()
        metrics = _field(row, "operationMetrics") or {}
        # DELETE and UPDATE count numDeletionVectorsAdded/Removed/Updated, MERGE numTargetDeletionVectors...
        vectors = any("DeletionVectors" in name and _count(value) for name, value in metrics.items())
        unknown = operation in _VECTOR_WRITERS and not metrics
        if vectors or unknown or operation == "RESTORE":
            found.add(int(row["version"]))
    return found


def _field(row: Mapping[str, Any], name: str) -> Any:
    """A column of a ``DESCRIBE HISTORY`` row, None where the row has no such column (older Delta releases)."""
    try:
        return row[name]
    except (KeyError, ValueError, IndexError):
        return None


def _count(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
