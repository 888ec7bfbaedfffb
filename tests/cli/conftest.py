"""Fixtures of the command-line tests: a dataset root on local disk or on the S3 test server (SeaweedFS)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest

from streaming.cli import main
from tests.remotes import make_remote

# The S3 case starts the S3 test server: marked `services` here, as tests/conftest.py marks the fixtures that do.
STORES = ["local", pytest.param("s3", marks=pytest.mark.services)]


@pytest.fixture(autouse=True)
def isolated_environment(credential_free_environment: None) -> Iterator[None]:
    """Every command-line test runs without the machine's credentials (see `credential_free_environment`)."""
    yield


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Callable[[str], str]:
    """`store(name)` → a fresh dataset root URL on local disk or on the S3 test server."""
    remote = make_remote(request.param, request, monkeypatch, tmp_path)
    return lambda name: remote.url(name)


@pytest.fixture
def s3_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path) -> Callable[[str], str]:
    """`s3_store(name)` → a fresh dataset root URL on the S3 test server."""
    remote = make_remote("s3", request, monkeypatch, tmp_path)
    return lambda name: remote.url(name)


def run_cli(*argv: str) -> tuple[int, Any, str]:
    """Run the command line in-process: `(exit code, the --json document or stdout text, stderr)`."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    text = out.getvalue()
    if "--json" in argv and text.strip():
        return code, json.loads(text), err.getvalue()
    return code, text, err.getvalue()
