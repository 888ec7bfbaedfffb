"""The fuzzing targets: each takes untrusted bytes or text and must fail only with the documented errors.

Targets: ``index.json`` (both parsers), every safe decoder, MDS shard headers, URLs, and (issue 24) the
dataset's commit files, its checkpoints, its conversion record and the sub-indexes ``merge_index`` reads.

Used by `test_fuzz` (a mutation fuzzer and hypothesis, at least 10,000 inputs per target) and by
`test_fuzz_corpus` (the committed examples in ``fuzz_corpus.json``, replayed as plain tests). `RUNS` counts
the inputs each target ran in this process (the security conftest prints it in the terminal summary).
"""

from __future__ import annotations

import atexit
import functools
import gzip
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from typing import ParamSpec

from streaming.delta.deletion_vectors import DeletionVectorError, deleted_positions
from streaming.format import commit_log, merge
from streaming.format.commit_checks import check_conversion_record, load_commit, load_json
from streaming.format.errors import ShardCorruptError
from streaming.format.index import dumps_index, parse_index, shard_files
from streaming.format.mds.encodings import get_mds_coder, get_mds_encodings, is_mds_encoding_safe
from streaming.format.mds.reader import MDSReader
from streaming.format.table import ShardTable
from streaming.storage.dataset_root import DatasetRoot
from streaming.storage.secrets import scrub
from streaming.storage.url import check_segments, split_url, without_password

#: Every safe MDS encoding (``pkl`` runs code by design and is refused before decoding).
SAFE_ENCODINGS = sorted(name for name in get_mds_encodings() if is_mds_encoding_safe(name))
_SCRATCH = tempfile.mkdtemp(prefix="mds-fuzz-")
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
#: Inputs run per target, by target name.
RUNS: Counter[str] = Counter()

_P = ParamSpec("_P")


def _counted(target: Callable[_P, None]) -> Callable[_P, None]:
    @functools.wraps(target)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> None:
        RUNS[target.__name__] += 1
        target(*args, **kwargs)

    return run


@_counted
def index_json(data: bytes) -> None:
    """Both index parsers accept the text or refuse it with a ValueError naming the index."""
    for parse in (ShardTable.from_bytes, parse_index):
        try:
            parse(data, "fuzz/index.json")
        except ValueError as err:
            assert "fuzz/index.json" in str(err), err


def _reader(encodings: list[str], samples: int, size: int) -> MDSReader:
    sizes = [get_mds_coder(encoding).size for encoding in encodings]
    names = [f"c{i}" for i in range(len(encodings))]
    raw = {"basename": "shard.mds", "bytes": size, "hashes": {}}
    return MDSReader(_SCRATCH, None, encodings, names, sizes, None, [], raw, samples, None, None)


@_counted
def decoders(encoding: str, data: bytes) -> None:
    """Decoding any bytes as any safe encoding gives a value or a ShardCorruptError naming the column."""
    reader = _reader([encoding], 0, 0)
    try:
        reader.decode_sample(data)
    except ShardCorruptError as err:
        assert "column c0" in str(err) or "length field" in str(err) or "holds" in str(err), err


@_counted
def shard_header(samples: int, data: bytes) -> None:
    """A shard file of any bytes opens and iterates, or fails with ShardCorruptError naming the file."""
    # Rewritten in place and cut to length: truncating to zero first (``open(..., "wb")``) makes ext4 flush
    # the file on close, milliseconds per input.
    fd = os.open(os.path.join(_SCRATCH, "shard.mds"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    reader = _reader(["int", "str"], samples, len(data))
    try:
        for _ in reader:
            pass
    except ShardCorruptError as err:
        assert "shard.mds" in str(err), err


@_counted
def deletion_vector(rows: int, cardinality: int, data: bytes) -> None:
    """A Delta deletion vector of any bytes, inline in the log and in a vector file, gives sorted distinct positions
    inside the file, as many as its descriptor says, or a DeletionVectorError naming the data file."""
    import base64
    import struct
    import uuid
    import zlib

    from pyarrow.fs import LocalFileSystem, SubTreeFileSystem

    padded = data + b"\0" * (-len(data) % 4)
    text = base64.b85encode(padded).decode().translate(str.maketrans(_B85, _Z85))
    identifier = uuid.UUID(int=RUNS["deletion_vector"])
    with open(os.path.join(_SCRATCH, f"deletion_vector_{identifier}.bin"), "wb") as handle:
        handle.write(b"\x01" + struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
    stored = base64.b85encode(identifier.bytes).decode().translate(str.maketrans(_B85, _Z85))
    descriptors = [
        {"storageType": "i", "pathOrInlineDv": text, "sizeInBytes": len(data), "cardinality": cardinality},
        {
            "storageType": "u",
            "pathOrInlineDv": stored,
            "offset": 1,
            "sizeInBytes": len(data),
            "cardinality": cardinality,
        },
    ]
    filesystem = SubTreeFileSystem(_SCRATCH, LocalFileSystem())
    for descriptor in descriptors:
        try:
            positions = deleted_positions(descriptor, rows, filesystem, "fuzz/part-0.parquet")
        except DeletionVectorError as err:
            assert "fuzz/part-0.parquet" in str(err) or "Z85" in str(err) or "path" in str(err), err
            continue
        assert len(positions) == cardinality and (positions[:-1] < positions[1:]).all(), descriptor
        assert not len(positions) or (0 <= positions[0] and positions[-1] < rows), descriptor


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_B85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"


@_counted
def urls(text: str) -> None:
    """URL parsing and checks fail only with ValueError; scrubbing never leaves a password behind."""
    for step in (split_url, check_segments, without_password):
        try:
            step(text)
        except ValueError:
            pass
    cleaned = scrub(text)
    assert scrub(cleaned) == cleaned


def _republished(shards: list, where: str) -> None:
    """What a commit or a merge publishes as ``index.json`` is accepted by both index parsers, or refused naming it."""
    text = dumps_index(shards)
    for parse in (ShardTable.from_bytes, parse_index):
        try:
            parse(text.encode(), where)
        except ValueError as err:
            assert where in str(err), err


@_counted
def commit_file(version: int, data: bytes) -> None:
    """A commit file is a commit or a ValueError naming it; an accepted one names only files inside the dataset,
    republishes as a valid index and carries a conversion record a new commit can extend."""
    where = f"fuzz/_mds_log/{version:020d}.json"
    try:
        body = load_commit(data.decode("utf-8"), version, where)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return  # not JSON (yet): its reader waits for a torn commit to complete, then names it
    except ValueError as err:
        assert where in str(err), err
        return
    state = commit_log._apply(commit_log.Snapshot(0, logged=True), body)
    root = DatasetRoot(_SCRATCH)
    named = [
        *body.get("remove", []),
        *commit_log.removed_files(state, commit_log.Snapshot(version + 1)),
        *((body.get("record") or {}).get("files") or []),
    ]
    for name in named:
        root.child(name)  # raises if the name could leave the dataset
    _republished(state.shards, "fuzz/republished.json")
    json.dumps(_extended(state).metadata)


def _extended(state: commit_log.Snapshot) -> commit_log.Snapshot:
    """``state`` after one more append carrying a run record (what the next writer does with it)."""
    change = {"version": state.version + 1, "operation": commit_log.APPEND, "record": {"run": "r", "source": {}}}
    return commit_log._apply(state, change)


@_counted
def checkpoint_file(version: int, data: bytes) -> None:
    """A checkpoint (gzip of ``data``) is read as a state or passed over (None: the commits serve); an accepted
    one names only files inside the dataset and republishes as a valid index."""
    root = DatasetRoot(os.path.join(_SCRATCH, "checkpoint"))
    root.write_bytes(commit_log.checkpoint_path(version), gzip.compress(data, mtime=0))
    state = commit_log._read_checkpoint(root, version, commit_log.CHECKPOINT_SLACK)
    if state is None:
        return
    for name in commit_log.removed_files(state, commit_log.Snapshot(version + 1)):
        root.child(name)  # raises if the name could leave the dataset
    _republished(state.shards, "fuzz/republished.json")
    json.dumps(_extended(state).metadata)


@_counted
def conversion_record(data: bytes) -> None:
    """``mds_conversion.json`` is a record or a ValueError naming it; an accepted one is extended by a commit."""
    where = "fuzz/mds_conversion.json"
    try:
        record = check_conversion_record(load_json(data.decode("utf-8"), where), where)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return  # a legacy record that is not JSON counts as absent
    except ValueError as err:
        assert where in str(err), err
        return
    state = commit_log.Snapshot(0, [], record)
    json.dumps(_extended(state).metadata)


@_counted
def merge_input(data: bytes) -> None:
    """A sub-index ``merge_index`` reads is merged (every name below its folder) or a ValueError naming it."""
    folder = os.path.join(_SCRATCH, "merge", "part-0")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "index.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)
    try:
        entries = merge._read_index((path, ""), _SCRATCH, 0, 1.0, (os.path.dirname(folder), None))
    except ValueError as err:
        assert path in str(err), err
        return
    merged = [merge.rebase(entry, "part-0") for entry in entries]
    for entry in merged:
        for _, info in shard_files(entry):
            assert info["basename"].startswith("part-0/"), info
    _republished(merged, "fuzz/merged.json")
