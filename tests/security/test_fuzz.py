"""Fuzzing of index parsing, shard headers, every decoder, the URL parsers, commit files, conversion records,
merge inputs and Delta deletion vectors: at least 10,000 inputs per target.

Two engines, each where it pays:

- a seeded mutation fuzzer (`mutator`) runs ``MDS_FUZZ_INPUTS`` (default 10,000) inputs through every target,
  edits of the kept corpus (``fuzz_corpus.json``) and of valid inputs our own writers produce (`fuzz_seeds`);
  it costs microseconds an input, so the target's own time dominates;
- hypothesis adds inputs drawn from a grammar where a grammar reaches what edits rarely do: whole index
  structures with fields of the wrong type, and URLs assembled from schemes, segments and arbitrary unicode.
  Each hypothesis example is a batch of inputs (its per-example overhead is the larger cost), the
  generate phase only (the corpus is replayed by `test_fuzz_corpus`; shrinking runs only after a failure),
  no example database and no deadline.

An input counts once each time it runs through a target (`fuzz_targets.RUNS`); the terminal summary prints
the counts. The mutation seed is random per run and printed on failure, with the input to add to the corpus.
"""

from __future__ import annotations

import base64
import json
import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.security import fuzz_seeds, fuzz_targets, mutator
from tests.security.test_fuzz_corpus import CORPUS

# 10,000 inputs per target: about a minute in all, so the core lane runs them and `make unit` leaves them out
# (the kept corpus, `test_fuzz_corpus.py`, stays in it).
pytestmark = pytest.mark.slow

INPUTS = int(os.environ.get("MDS_FUZZ_INPUTS", "10000"))
SEED = int(os.environ.get("MDS_FUZZ_SEED", str(random.SystemRandom().randrange(2**32))))
#: Inputs per hypothesis example. Larger batches of index structures overrun hypothesis's per-example buffer
#: and are redrawn (100 took minutes); URLs are short.
INDEX_BATCH = 10
URL_BATCH = 100


def _fuzz(target: str, inputs: Iterator[tuple[Any, ...]], run: Callable[..., None]) -> None:
    """Run every input through ``run``; a failure names the seed and the input (base64 where it is bytes)."""
    before = fuzz_targets.RUNS[target]
    for args in inputs:
        try:
            run(*args)
        except Exception as err:
            shown = [base64.b64encode(arg).decode() if isinstance(arg, bytes) else arg for arg in args]
            raise AssertionError(f"{target} failed with MDS_FUZZ_SEED={SEED} on {shown!r} (corpus form)") from err
    assert fuzz_targets.RUNS[target] - before == INPUTS


def _rng(target: str) -> random.Random:
    return random.Random(f"{SEED}:{target}")


def test_index_json_mutated():
    rng = _rng("index_json")
    seeds = fuzz_seeds.index_seeds() + [base64.b64decode(data) for data in CORPUS["index_json"]]
    trees = [json.loads(text) for text in fuzz_seeds.index_seeds()]

    def inputs() -> Iterator[tuple[bytes]]:
        for _ in range(INPUTS):
            if rng.random() < 0.6:
                yield (json.dumps(mutator.mutate_json(rng.choice(trees), rng)).encode(),)
            else:
                yield (mutator.mutate_bytes(rng.choice(seeds), rng, seeds),)

    _fuzz("index_json", inputs(), fuzz_targets.index_json)


def test_decoders_mutated():
    rng = _rng("decoders")
    seeds = fuzz_seeds.decoder_seeds(tuple(fuzz_targets.SAFE_ENCODINGS)) + [
        (encoding, base64.b64decode(data)) for encoding, data in CORPUS["decoders"]
    ]
    pool = [data for _, data in seeds]

    def inputs() -> Iterator[tuple[str, bytes]]:
        for _ in range(INPUTS):
            encoding, data = rng.choice(seeds)
            if rng.random() < 0.1:
                encoding = rng.choice(fuzz_targets.SAFE_ENCODINGS)  # another encoding's bytes
            yield encoding, mutator.mutate_bytes(data, rng, pool)

    _fuzz("decoders", inputs(), fuzz_targets.decoders)


def test_shard_header_mutated():
    rng = _rng("shard_header")
    seeds = fuzz_seeds.shard_seeds() + [(samples, base64.b64decode(data)) for samples, data in CORPUS["shard_header"]]
    pool = [data for _, data in seeds]

    def inputs() -> Iterator[tuple[int, bytes]]:
        for _ in range(INPUTS):
            samples, data = rng.choice(seeds)
            if rng.random() < 0.2:
                samples = rng.randint(0, 6)
            yield samples, mutator.mutate_bytes(data, rng, pool)

    _fuzz("shard_header", inputs(), fuzz_targets.shard_header)


def test_deletion_vector_mutated():
    rng = _rng("deletion_vector")
    seeds = fuzz_seeds.vector_seeds()
    pool = [data for _, _, data in seeds]

    def inputs() -> Iterator[tuple[int, int, bytes]]:
        for _ in range(INPUTS):
            rows, cardinality, data = rng.choice(seeds)
            if rng.random() < 0.2:
                rows = rng.randint(0, 80000)
            if rng.random() < 0.2:
                cardinality = rng.randint(0, 80000)
            yield rows, cardinality, mutator.mutate_bytes(data, rng, pool)

    _fuzz("deletion_vector", inputs(), fuzz_targets.deletion_vector)


def _json_inputs(rng: random.Random, trees: list[Any], seeds: list[bytes]) -> Iterator[bytes]:
    """Edits of JSON documents: of the tree (a field of another type, a planted path) or of its bytes."""
    for _ in range(INPUTS):
        if rng.random() < 0.6:
            yield json.dumps(mutator.mutate_json(rng.choice(trees), rng)).encode()
        else:
            yield mutator.mutate_bytes(rng.choice(seeds), rng, seeds)


def test_commit_file_mutated():
    rng = _rng("commit_file")
    seeds = fuzz_seeds.commit_seeds() + [(version, base64.b64decode(data)) for version, data in CORPUS["commit_file"]]
    texts = [data for _, data in seeds]
    trees = [json.loads(data) for data in texts if _is_json(data)]
    versions = [version for version, _ in seeds]
    inputs = ((rng.choice(versions), data) for data in _json_inputs(rng, trees, texts))
    _fuzz("commit_file", inputs, fuzz_targets.commit_file)


def test_checkpoint_file_mutated():
    rng = _rng("checkpoint_file")
    seeds = fuzz_seeds.checkpoint_seeds() + [(v, base64.b64decode(data)) for v, data in CORPUS["checkpoint_file"]]
    texts = [data for _, data in seeds]
    trees = [json.loads(data) for data in texts]
    versions = [version for version, _ in seeds]
    inputs = ((rng.choice(versions), data) for data in _json_inputs(rng, trees, texts))
    _fuzz("checkpoint_file", inputs, fuzz_targets.checkpoint_file)


def test_conversion_record_mutated():
    rng = _rng("conversion_record")
    seeds = fuzz_seeds.record_seeds() + [base64.b64decode(data) for data in CORPUS["conversion_record"]]
    trees = [json.loads(data) for data in seeds if _is_json(data)]
    _fuzz("conversion_record", ((data,) for data in _json_inputs(rng, trees, seeds)), fuzz_targets.conversion_record)


def test_merge_input_mutated():
    rng = _rng("merge_input")
    seeds = fuzz_seeds.index_seeds() + [base64.b64decode(data) for data in CORPUS["merge_input"]]
    trees = [json.loads(text) for text in fuzz_seeds.index_seeds()]
    _fuzz("merge_input", ((data,) for data in _json_inputs(rng, trees, seeds)), fuzz_targets.merge_input)


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return True


_SCHEMES = ["s3://", "gs://", "azure://", "dbfs:", "file://", "/Volumes/", "", "sftp://u:p@", "x:", "hf://", "oci://"]
_SEGMENTS = ["a", "..", ".", "", "b:c@d", "%2e%2e", "\\", "[", "Volumes", "u:p@h", "?x=1", "#f"]
_URL_SEEDS = [
    "s3://bucket/prefix/index.json",
    "gs://b/p/shard.00000.mds.zstd",
    "azure://container/dir/x",
    "abfss://c@account.dfs.core.windows.net/p",
    "dbfs:/Volumes/cat/sch/vol/p",
    "/Volumes/cat/sch/vol/p",
    "file:///tmp/x",
    "sftp://user:secret@host:22/p",
    "http://KEY:SECRET@127.0.0.1:9000/b",
    "oci://bucket@namespace/p",
    "hf://datasets/org/name/p",
]


def test_urls_mutated():
    rng = _rng("urls")
    seeds = _URL_SEEDS + CORPUS["urls"]
    tokens = _SCHEMES + _SEGMENTS + ["/", "//", "@", ":"]

    def inputs() -> Iterator[tuple[str]]:
        for _ in range(INPUTS):
            yield (mutator.mutate_text(rng.choice(seeds), rng, tokens),)

    _fuzz("urls", inputs(), fuzz_targets.urls)


#: Inputs each grammar adds on top of the mutation fuzzer's (the grammar is the slower engine, ~1 ms an input).
GRAMMAR_INPUTS = 1000


def _grammar_settings(batch_size: int) -> settings:
    return settings(
        max_examples=max(1, GRAMMAR_INPUTS // batch_size),
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )


def batch(strategy: st.SearchStrategy, size: int) -> st.SearchStrategy:
    return st.lists(strategy, min_size=size, max_size=size)


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


@_grammar_settings(INDEX_BATCH)
@given(batch(_index.map(lambda obj: json.dumps(obj).encode()), INDEX_BATCH))
def test_index_json_grammar(inputs):
    for data in inputs:
        fuzz_targets.index_json(data)


@_grammar_settings(URL_BATCH)
@given(
    batch(
        st.one_of(
            st.builds(
                lambda p, s: p + "/".join(s),
                st.sampled_from(_SCHEMES),
                st.lists(st.sampled_from(_SEGMENTS), max_size=6),
            ),
            st.text(max_size=24),
        ),
        URL_BATCH,
    )
)
def test_urls_grammar(inputs):
    for text in inputs:
        fuzz_targets.urls(text)
