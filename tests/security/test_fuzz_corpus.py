"""Replays the committed fuzzing corpus (``fuzz_corpus.json``: inputs that once failed, base64 bytes)."""

from __future__ import annotations

import base64
import json
import os

import pytest

from tests.security import fuzz_targets

with open(os.path.join(os.path.dirname(__file__), "fuzz_corpus.json"), encoding="utf-8") as _file:
    CORPUS = json.load(_file)


def _unpack(value):
    return base64.b64decode(value)


@pytest.mark.parametrize("data", CORPUS["index_json"])
def test_index_json(data):
    fuzz_targets.index_json(_unpack(data))


@pytest.mark.parametrize(("encoding", "data"), CORPUS["decoders"])
def test_decoders(encoding, data):
    fuzz_targets.decoders(encoding, _unpack(data))


@pytest.mark.parametrize(("samples", "data"), CORPUS["shard_header"])
def test_shard_header(samples, data):
    fuzz_targets.shard_header(samples, _unpack(data))


@pytest.mark.parametrize("text", CORPUS["urls"])
def test_urls(text):
    fuzz_targets.urls(text)


@pytest.mark.parametrize(("version", "data"), CORPUS["commit_file"])
def test_commit_file(version, data):
    fuzz_targets.commit_file(version, _unpack(data))


@pytest.mark.parametrize(("version", "data"), CORPUS["checkpoint_file"])
def test_checkpoint_file(version, data):
    fuzz_targets.checkpoint_file(version, _unpack(data))


@pytest.mark.parametrize("data", CORPUS["conversion_record"])
def test_conversion_record(data):
    fuzz_targets.conversion_record(_unpack(data))


@pytest.mark.parametrize("data", CORPUS["merge_input"])
def test_merge_input(data):
    fuzz_targets.merge_input(_unpack(data))
