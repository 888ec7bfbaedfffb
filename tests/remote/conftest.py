"""Fixtures of the remote end-to-end tests: one `Remote` per scheme on its real loopback server.

The servers, buckets, `Remote` and the credential-free environment come from `tests/services.py` and
`tests/remotes.py` (loaded by `tests/conftest.py`); this file adds the two URL spellings those lack
(`file://` and a plain, unmounted `/Volumes/...` path) and keeps writer temp directories inside each
test's `tmp_path`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator

import pytest

from streaming.storage import clear_storage_cache
from streaming.storage.url import split_url
from tests.remotes import Remote

CLOUD_SCHEMES = ["s3", "gs", "azure", "azure-dl", "abfss", "oci", "dbfs", "volumes", "plain-volumes", "hf", "sftp"]
SCHEMES = ["file", *CLOUD_SCHEMES]


def remote_for(scheme: str, factory: Callable[[str], Remote]) -> Remote:
    """The `Remote` of `scheme`; `file` and `plain-volumes` respell the `local` and `volumes` roots."""
    if scheme == "file":
        base = factory("local")
        return dataclasses.replace(base, scheme="file", root="file://" + os.path.abspath(base.root))
    if scheme == "plain-volumes":
        base = factory("volumes")
        return dataclasses.replace(base, scheme="plain-volumes", root=split_url(base.root).key)
    return factory(scheme)


@pytest.fixture(params=SCHEMES)
def remote(request: pytest.FixtureRequest, remote_factory: Callable[[str], Remote]) -> Remote:
    """Each scheme in turn (local `file://` included), with a fresh, empty root."""
    return remote_for(request.param, remote_factory)


@pytest.fixture(params=CLOUD_SCHEMES)
def cloud(request: pytest.FixtureRequest, remote_factory: Callable[[str], Remote]) -> Remote:
    """Each scheme that has credentials to get wrong, with a fresh, empty root."""
    return remote_for(request.param, remote_factory)


@pytest.fixture(autouse=True)
def isolated_environment(credential_free_environment: None, private_tempdir: str) -> Iterator[None]:
    """Every remote test runs without the machine's credentials (see `credential_free_environment`), and its
    temporary folders go into its own directory (`private_tempdir`)."""
    yield


@pytest.fixture
def break_credentials(monkeypatch: pytest.MonkeyPatch) -> Callable[[Remote], Callable[[], None]]:
    """`break_credentials(remote)` makes its credentials wrong and returns a function that restores them."""

    def breaker(remote: Remote) -> Callable[[], None]:
        before = dict(os.environ)
        remote.break_credentials()
        clear_storage_cache()

        def restore() -> None:
            for name in set(before) | set(os.environ):
                if name in before:
                    monkeypatch.setenv(name, before[name])
                else:
                    monkeypatch.delenv(name, raising=False)
            clear_storage_cache()

        return restore

    return breaker
