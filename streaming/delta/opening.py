"""Opening a Delta table with delta-rs, only once the checkpoint it would decode is bounded by its own size.

delta-rs builds a table's state from its newest checkpoint (a Parquet file of actions) and the commits after it,
and decodes the whole checkpoint as it opens the table. A checkpoint is untrusted: a few KiB of identical ``add``
actions can declare millions of them, each decoded into memory. Every action of an honest checkpoint carries a
key of its own (a file's distinct path, an application id), so its rows never outnumber its bytes;
`open_delta_table` reads the footers of the checkpoint files delta-rs would read (the newest at or before the
version asked for, and the one ``_last_checkpoint`` names) and refuses a file declaring more rows than that, or
more than ``_last_checkpoint`` says it holds, before delta-rs opens the table (`ParquetBoundsError`, naming the
table and the file). A V2 checkpoint's sidecar files are bounded the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

from streaming._extras import require
from streaming.storage.parquet_bounds import ParquetBoundsError, check_checkpoint
from streaming.storage.table_files import table_filesystem
from streaming.storage.untrusted_text import shown

#: Any checkpoint file in Parquet: classic single, one part of a multi-part one (its part count), or V2 (its id).
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.(\d{10})|\.([0-9a-fA-F-]{36}))?\.parquet$")
#: A V2 checkpoint's id in its file name; its actions may continue in the log's sidecar files.
_V2_ID = re.compile(r"[0-9a-fA-F-]{36}")
_SIDECARS = "_delta_log/_sidecars"
#: The most ``_last_checkpoint`` (a small JSON hint) is read of.
_HINT_LIMIT = 1 << 20


def open_delta_table(uri: str, version: int | None = None) -> Any:
    """delta-rs's ``DeltaTable`` of ``uri`` at ``version`` (the latest when None), opened only after
    `check_checkpoints` passed."""
    table_type = require("deltalake", "delta", "Reading a Delta table without Spark").DeltaTable
    check_checkpoints(uri, version)
    return table_type(uri, version=version)


def check_checkpoints(uri: str, version: int | None) -> None:
    """Refuse (`ParquetBoundsError`) a checkpoint of ``uri`` that delta-rs would decode to open ``version`` and
    that declares more rows than its bytes, or than ``_last_checkpoint`` gives for it."""
    from pyarrow.fs import FileSelector, FileType

    filesystem = _filesystem(uri)
    listing = filesystem.get_file_info(FileSelector("_delta_log", allow_not_found=True))
    # version -> checkpoint (its part count, or its V2 id; "" for a single file) -> its files
    found: dict[int, dict[str, list[Any]]] = {}
    for info in listing:
        match = _CHECKPOINT.match(info.base_name)
        if match and info.type == FileType.File and (version is None or int(match.group(1)) <= version):
            found.setdefault(int(match.group(1)), {}).setdefault(match.group(2) or match.group(3) or "", []).append(
                info
            )
    hint = _last_checkpoint(filesystem)
    chosen = {max(found)} if found else set()
    if hint.get("version") in found:  # `found` holds only versions at or before ``version``
        chosen.add(hint["version"])
    for number in sorted(chosen):
        for kind, files in found[number].items():
            if _V2_ID.fullmatch(kind):
                _check_sidecars(filesystem, uri)
            declared = sum(_declared_rows(filesystem, uri, info) for info in files)
            size, parts = hint.get("size"), hint.get("parts")
            described = kind == (f"{parts:010d}" if isinstance(parts, int) else "")
            if number == hint.get("version") and described and isinstance(size, int) and declared > size:
                raise ParquetBoundsError(
                    f"The Delta table {shown(uri)} has the checkpoint of version {number} "
                    f"({', '.join(shown(info.path) for info in files)}), which declares {declared} actions where "
                    f"_delta_log/_last_checkpoint says {size}; it was not read."
                )


def _check_sidecars(filesystem: Any, uri: str) -> None:
    """Refuse a sidecar file of a V2 checkpoint that declares more rows than bytes: delta-rs decodes the sidecars a
    V2 checkpoint names as it decodes the checkpoint. Which ones it names is known only by decoding it, so every
    sidecar of the log is bounded (a footer each)."""
    from pyarrow.fs import FileSelector, FileType

    for info in filesystem.get_file_info(FileSelector(_SIDECARS, allow_not_found=True)):
        if info.type == FileType.File and info.base_name.endswith(".parquet"):
            _declared_rows(filesystem, uri, info)


def _declared_rows(filesystem: Any, uri: str, info: Any) -> int:
    """The rows a checkpoint file's footer declares, refused when its footer is past the bounds of
    `check_checkpoint` (more rows than bytes, more decoded bytes than such actions take)."""
    with filesystem.open_input_file(info.path) as handle:
        return check_checkpoint(
            handle, f"The Delta table {shown(uri)} has the checkpoint {shown(info.path)}, which", info.size
        )


def _filesystem(uri: str) -> Any:
    """The table's files: a local table's without following a link, a remote one's through delta-rs's store."""
    local = table_filesystem(uri)
    if local is not None:
        return local
    from deltalake.fs import DeltaStorageHandler
    from pyarrow.fs import PyFileSystem

    return PyFileSystem(DeltaStorageHandler(uri))


def _last_checkpoint(filesystem: Any) -> dict[str, Any]:
    """``_delta_log/_last_checkpoint`` as JSON ({} when missing or not an object: delta-rs then lists the log)."""
    try:
        with filesystem.open_input_stream("_delta_log/_last_checkpoint") as stream:
            text = stream.read(_HINT_LIMIT)
    except FileNotFoundError:
        return {}
    try:
        hint = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return hint if isinstance(hint, dict) else {}
