"""Property-based fuzzing (hypothesis) of index parsing, shard headers, every decoder and the URL parsers.

Each target gets `INPUTS` inputs per run (``MDS_FUZZ_INPUTS``, default 10,000), drawn `BATCH` at a time per
hypothesis example so that the per-example overhead of hypothesis does not dominate. No example database
is written; regressions go to the committed ``fuzz_corpus.json``, replayed by `test_fuzz_corpus`.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.security import fuzz_targets

INPUTS = int(os.environ.get("MDS_FUZZ_INPUTS", "10000"))
BATCH = 10
_SETTINGS = settings(
    max_examples=max(1, INPUTS // BATCH), deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def batch(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(strategy, min_size=BATCH, max_size=BATCH)


_json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=12)
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
_file = st.fixed_dictionaries(
    {"basename": st.sampled_from(["shard.00000.mds", "", "../x", "a/b.mds", "/abs"]) | st.text(max_size=8)},
    optional={"bytes": st.integers(-5, 2**65) | _json, "hashes": _json},
)
_shard = st.fixed_dictionaries(
    {},
    optional={
        "version": st.sampled_from([2, 1, None]),
        "format": st.sampled_from(["mds", "json", "csv", "nope"]),
        "samples": st.integers(-5, 2**65) | _json,
        "raw_data": _file | _json,
        "zip_data": _file | st.none(),
        "column_encodings": st.lists(st.sampled_from(["int", "str", "bytes", "json"]), max_size=3) | _json,
        "column_names": st.lists(st.text(max_size=4), max_size=3) | _json,
        "compression": st.sampled_from([None, "zstd", "bogus"]),
        "size_limit": st.integers(-1, 2**40) | st.none(),
    },
)
_index = st.fixed_dictionaries({"shards": st.lists(_shard, max_size=3) | _json, "version": st.sampled_from([2, 1])})


@_SETTINGS
@given(batch(st.one_of(_index.map(lambda obj: json.dumps(obj).encode()), st.binary(max_size=64))))
def test_index_json(inputs):
    for data in inputs:
        fuzz_targets.index_json(data)


@_SETTINGS
@given(batch(st.tuples(st.sampled_from(fuzz_targets.SAFE_ENCODINGS), st.binary(max_size=48))))
def test_decoders(inputs):
    for encoding, data in inputs:
        fuzz_targets.decoders(encoding, data)


_u32 = st.integers(0, 2**32 - 1).map(lambda n: n.to_bytes(4, "little"))


@_SETTINGS
@given(batch(st.tuples(st.integers(0, 6), st.lists(_u32 | st.binary(max_size=6), max_size=10).map(b"".join))))
def test_shard_header(inputs):
    for samples, data in inputs:
        fuzz_targets.shard_header(samples, data)


_url_parts = st.sampled_from(["s3://", "gs://", "azure://", "dbfs:", "file://", "/Volumes/", "", "sftp://u:p@", "x:"])
_segments = st.lists(st.sampled_from(["a", "..", ".", "", "b:c@d", "%2e%2e", "\\", "[", "Volumes"]), max_size=6)


@_SETTINGS
@given(batch(st.one_of(st.builds(lambda p, s: p + "/".join(s), _url_parts, _segments), st.text(max_size=24))))
def test_urls(inputs):
    for text in inputs:
        fuzz_targets.urls(text)
