"""The fuzzing targets: each takes untrusted bytes or text and must fail only with the documented errors.

Used by `test_fuzz` (hypothesis, 10,000 inputs per target) and by `test_fuzz_corpus` (the committed examples
in ``fuzz_corpus.json``, replayed as plain tests).
"""

from __future__ import annotations

import os
import tempfile

from streaming.format.errors import ShardCorruptError
from streaming.format.index import parse_index
from streaming.format.mds.encodings import get_mds_coder, get_mds_encodings, is_mds_encoding_safe
from streaming.format.mds.reader import MDSReader
from streaming.format.table import ShardTable
from streaming.storage.url import check_segments, scrub, split_url, without_password

#: Every safe MDS encoding (``pkl`` runs code by design and is refused before decoding).
SAFE_ENCODINGS = sorted(name for name in get_mds_encodings() if is_mds_encoding_safe(name))
_SCRATCH = tempfile.mkdtemp(prefix="mds-fuzz-")


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


def decoders(encoding: str, data: bytes) -> None:
    """Decoding any bytes as any safe encoding gives a value or a ShardCorruptError naming the column."""
    reader = _reader([encoding], 0, 0)
    try:
        reader.decode_sample(data)
    except ShardCorruptError as err:
        assert "column c0" in str(err) or "length field" in str(err) or "holds" in str(err), err


def shard_header(samples: int, data: bytes) -> None:
    """A shard file of any bytes opens and iterates, or fails with ShardCorruptError naming the file."""
    with open(os.path.join(_SCRATCH, "shard.mds"), "wb") as f:
        f.write(data)
    reader = _reader(["int", "str"], samples, len(data))
    try:
        for _ in reader:
            pass
    except ShardCorruptError as err:
        assert "shard.mds" in str(err), err


def urls(text: str) -> None:
    """URL parsing and checks fail only with ValueError; scrubbing never leaves a password behind."""
    for step in (split_url, check_segments, without_password):
        try:
            step(text)
        except ValueError:
            pass
    cleaned = scrub(text)
    assert scrub(cleaned) == cleaned
