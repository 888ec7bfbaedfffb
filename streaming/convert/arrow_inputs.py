"""Inputs of the pyarrow engine: what an input is, how it splits into tasks, and its record batches.

Kinds: Parquet (a file or a folder of files), JSON Lines, CSV, a Hugging Face `datasets` folder saved with
`save_to_disk` (Arrow stream files listed in `state.json`), and a Delta table path (read with `deltalake`).
Files are reached through the storage layer, so a source may sit on any store: a task downloads its file to
a scratch folder, reads it batch by batch, and deletes it. A task is one file, or for a large local Parquet
file a run of its row groups, so memory stays at a few batches whatever the input's size. A local file found
in a source folder is opened from that folder without following a link (`LocalTree`), as a regular file, and
handed to pyarrow by its descriptor (``/proc/self/fd``), so a link planted in a shared folder is refused.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from streaming._extras import install_hint
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.local_tree import LocalTree, open_regular
from streaming.storage.out_argument import normalize_root
from streaming.storage.registry import storage_for
from streaming.storage.scratch import scratch
from streaming.storage.url import is_remote

KINDS = ("parquet", "jsonl", "csv", "hf", "delta")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".arrow": "hf",
}
BATCH_ROWS = 8192
BATCH_BYTES = 8 << 20  # a batch is at most this many bytes (uncompressed), or BATCH_ROWS rows
_GROUPS_PER_TASK_TARGET = 4


class InputChoiceError(ValueError):
    """The input needs a choice only the caller can make (its format, a split, a reader); the message says which."""


@dataclass(frozen=True)
class Task:
    """One unit of work: a file (URL or local path) of a kind, optionally restricted to some row groups."""

    kind: str
    url: str
    row_groups: tuple[int, ...] | None = None
    rows: int | None = None
    #: The local folder the file was listed in (its path below it is opened without following a link).
    root: str | None = None
    #: The version a Delta table's task reads (pinned when the input was resolved).
    version: int | None = None


@dataclass(frozen=True)
class ArrowInput:
    """A resolved input: its kind, its root, and its tasks in sample order."""

    kind: str
    root: str
    tasks: tuple[Task, ...]
    version: int | None = None

    @property
    def rows(self) -> int | None:
        counts = [task.rows for task in self.tasks if task.rows is not None]
        return sum(counts) if len(counts) == len(self.tasks) else None


def looks_like_table_name(text: str) -> bool:
    """`catalog.schema.table` or `schema.table`: no slash, not a file here, not a URL."""
    return not is_remote(text) and "/" not in text and os.sep not in text and not os.path.exists(text)


def _kind_of_file(name: str) -> str | None:
    return _EXTENSIONS.get(posixpath.splitext(name)[1].lower())


def detect(src: str, requested: str | None, workers: int, split: str | None = None) -> ArrowInput:
    """Resolve `src` (a file or folder on any store) into tasks; `requested` (a kind) overrides the detection."""
    root = normalize_root(src)
    storage = storage_for(root)
    if storage.exists(root):
        files = [root]
        folder_files: list[str] = []
    else:
        folder_files = DatasetRoot(root).list_relative()
        if not folder_files:
            raise FileNotFoundError(f"No input at {src}: neither a file nor a folder with files. Check the path.")
        files = []
    names = set(folder_files)
    kind = requested or _detect_kind(src, files, folder_files, names)
    if kind == "delta":
        return _delta_source(root)
    if kind == "hf":
        return _hf_source(root, names, split)
    if files:
        chosen = files
    else:
        chosen = [
            DatasetRoot(root).child(name) for name in folder_files if not _hidden(name) and _kind_of_file(name) == kind
        ]
        if not chosen:
            raise FileNotFoundError(f"No {kind} files in {src}.")
    folder = None if files or is_remote(root) else root
    if kind == "parquet":
        return ArrowInput(kind, root, tuple(_parquet_tasks(chosen, workers, folder)))
    return ArrowInput(kind, root, tuple(Task(kind, url, root=folder) for url in chosen))


def _detect_kind(src: str, files: list[str], folder_files: list[str], names: set[str]) -> str:
    """The input kind from the folder's layout or the files' extensions."""
    if any(name.startswith("_delta_log/") for name in names):
        return "delta"
    if names & {"state.json", "dataset_info.json", "dataset_dict.json"}:
        return "hf"
    kinds = {kind for kind in (_kind_of_file(name) for name in files or folder_files if not _hidden(name)) if kind}
    if len(kinds) != 1:
        raise InputChoiceError(
            f"Cannot tell the input format of {src} (formats found: {', '.join(sorted(kinds)) or 'none'}); pass "
            f"--format with one of {', '.join(KINDS)}."
        )
    return kinds.pop()


def _hidden(name: str) -> bool:
    return any(part.startswith(("_", ".")) for part in name.split("/"))


def _parquet_tasks(urls: list[str], workers: int, folder: str | None) -> Iterator[Task]:
    """One task per remote file; local files are split into runs of row groups so every worker has work."""
    import pyarrow.parquet as pq

    for url in urls:
        if is_remote(url):
            yield Task("parquet", url)
            continue
        with local_copy(url, folder) as path:
            metadata = pq.ParquetFile(path).metadata
        groups = metadata.num_row_groups
        per_task = max(1, -(-groups // max(1, workers * _GROUPS_PER_TASK_TARGET))) if len(urls) < workers else groups
        for start in range(0, max(groups, 1), max(per_task, 1)):
            chosen = tuple(range(start, min(start + per_task, groups)))
            rows = sum(metadata.row_group(g).num_rows for g in chosen)
            yield Task("parquet", url, chosen, rows, folder)


def _hf_source(root: str, names: set[str], split: str | None) -> ArrowInput:
    location = DatasetRoot(root)
    if "dataset_dict.json" in names:
        splits = json.loads(location.read_bytes("dataset_dict.json")).get("splits", [])
        if split is None:
            raise InputChoiceError(
                f"{root} is a Hugging Face DatasetDict with splits {splits}; choose one with --split NAME "
                f"(or convert each split to its own OUT)."
            )
        if split not in splits:
            raise InputChoiceError(f"No split {split!r} in {root}; its splits are {splits}.")
        return _hf_source(location.child(split), {n.split("/", 1)[1] for n in names if n.startswith(split + "/")}, None)
    if "state.json" not in names:
        raise FileNotFoundError(
            f"{root} has no state.json: save the dataset with datasets' save_to_disk (not to_parquet), or pass "
            f"the Parquet/JSON files with --format."
        )
    state = json.loads(location.read_bytes("state.json"))
    files = [entry["filename"] for entry in state.get("_data_files", [])]
    if not files:
        raise FileNotFoundError(f"{root}/state.json lists no data files.")
    folder = None if is_remote(root) else root
    return ArrowInput("hf", root, tuple(Task("hf", location.child(name), root=folder) for name in files))


def _delta_source(root: str) -> ArrowInput:
    if importlib.util.find_spec("deltalake") is None:
        raise InputChoiceError(
            f"Reading a Delta table without Spark needs the `deltalake` package. {install_hint('delta')} "
            "(or pass --spark to read it with Spark)."
        )
    snapshot = delta_snapshot(root, None)
    return ArrowInput("delta", root, (Task("delta", root, version=snapshot.version),), version=snapshot.version)


#: The Delta snapshot last resolved, by (root, version): the input's resolution, its schema and its batches share
#: one read of the table's log. One is kept (a table's file list), replaced by the next table's.
_PINNED: dict[tuple[str, int], Any] = {}


def delta_snapshot(root: str, version: int | None) -> Any:
    """The Delta table ``root`` at ``version`` (the newest when None; see `_PINNED`)."""
    from streaming.delta.snapshot import Snapshot

    if version is not None and (root, version) in _PINNED:
        return _PINNED[(root, version)]
    snapshot = Snapshot.open(root, version)
    _PINNED.clear()
    _PINNED[(root, snapshot.version)] = snapshot
    return snapshot


def read_schema(task: Task) -> pa.Schema:
    """The Arrow schema of a task's input (the first batch's, for JSON Lines and CSV)."""
    if task.kind == "delta":  # the log's schema: a table may hold no rows
        from streaming.delta.scan import Scan

        return Scan(delta_snapshot(task.url, task.version)).schema
    with _opened(task) as path:
        if task.kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_schema(path)
        for batch in _batches(task, path):
            return batch.schema
        return _empty_schema(task, path)


def _empty_schema(task: Task, path: str) -> pa.Schema:
    if task.kind == "hf":
        with pa.memory_map(path) as source:
            return pa.ipc.open_stream(source).schema
    raise ValueError(f"{task.url} holds no rows, so its columns cannot be inferred; pass a non-empty file.")


@contextlib.contextmanager
def local_copy(url: str, folder: str | None = None) -> Iterator[str]:
    """The file as a local path for the duration of a `with` block (downloaded to scratch when remote).

    A local file is opened first, as a regular file (a FIFO or device fails at once), from ``folder``
    without following a link below it when it was listed there; the path given to pyarrow names that open
    descriptor (``/proc/self/fd/N``, where the platform has it), so the file cannot be swapped meanwhile.
    """
    if not is_remote(url):
        path = normalize_root(url)
        if folder is not None:
            fd, _ = LocalTree(folder).open_file(os.path.relpath(path, folder).replace(os.sep, "/"))
        else:  # a file named by the caller: its own path may be a link of theirs
            fd, _ = open_regular(path, None, path, os.path.dirname(path), follow=True)
        try:
            yield f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else path
        finally:
            os.close(fd)
        return
    with scratch("mds-convert-") as folder:
        path = os.path.join(folder, posixpath.basename(url))
        storage_for(url).get(url, path)
        yield path


def _batches(task: Task, path: str) -> Iterator[pa.RecordBatch]:
    if task.kind == "parquet":
        import pyarrow.parquet as pq

        file = pq.ParquetFile(path, pre_buffer=False)
        metadata = file.metadata
        row_bytes = sum(metadata.row_group(g).total_byte_size for g in range(metadata.num_row_groups)) / max(
            metadata.num_rows, 1
        )
        rows = int(min(BATCH_ROWS, max(1, BATCH_BYTES // max(row_bytes, 1))))
        yield from file.iter_batches(batch_size=rows, row_groups=task.row_groups, use_threads=False)
    elif task.kind == "jsonl":
        yield from _json_lines(path)
    elif task.kind == "csv":
        import pyarrow.csv as pc

        yield from pc.open_csv(path)
    elif task.kind == "hf":
        with pa.memory_map(path) as source:
            yield from pa.ipc.open_stream(source)
    elif task.kind == "delta":
        from streaming.delta.scan import snapshot_batches

        yield from snapshot_batches(delta_snapshot(path, task.version), BATCH_ROWS)
    else:
        raise ValueError(f"Unknown input kind {task.kind!r}; valid: {', '.join(KINDS)}.")


#: How much JSON Lines text each block of the reader of pyarrow before 19 parses at once (open_json's own block size).
JSON_BLOCK_BYTES = 1 << 20


def _json_lines(path: str) -> Iterator[pa.RecordBatch]:
    """A JSON Lines file's record batches, read a block at a time.

    pyarrow 19 streams the file (``open_json``); before it (Databricks Runtime 14.3 to 16.4 ship pyarrow 8 to 15)
    blocks of whole lines are parsed one by one, each with the types the first block gave, as ``open_json`` does.
    """
    import pyarrow.json as pj

    if hasattr(pj, "open_json"):
        yield from pj.open_json(path)
        return
    schema = None
    with open(path, "rb") as file:
        while block := file.read(JSON_BLOCK_BYTES):
            block += file.readline()  # to the end of the line the block stopped in
            options = pj.ParseOptions(explicit_schema=schema) if schema is not None else None
            table = pj.read_json(pa.BufferReader(block), parse_options=options)
            schema = table.schema if schema is None else schema
            yield from table.to_batches()


def batches(task: Task) -> Iterator[pa.RecordBatch]:
    """The task's record batches, read as they are consumed (a remote file is downloaded first)."""
    with _opened(task) as path:
        yield from _batches(task, path)


@contextlib.contextmanager
def _opened(task: Task) -> Iterator[str]:
    """What pyarrow reads for a task: its file (`local_copy`), or a Delta table's own root (deltalake reads it)."""
    if task.kind == "delta":
        yield task.url
        return
    with local_copy(task.url, task.root) as path:
        yield path
