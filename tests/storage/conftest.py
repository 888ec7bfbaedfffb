"""Storage test fixtures: each scheme in turn on its real server, in an environment without the machine's credentials.

The servers, buckets, `Remote` and `remote_factory` are shared by the suite (`tests/services.py` and
`tests/remotes.py`, loaded by `tests/conftest.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.remotes import ALL_SCHEMES, REMOTE_SCHEMES, Remote


@pytest.fixture(autouse=True)
def isolated_environment(credential_free_environment: None) -> Iterator[None]:
    """Every storage test runs without the machine's credentials (see `credential_free_environment`)."""
    yield


@pytest.fixture(params=ALL_SCHEMES)
def remote(request: pytest.FixtureRequest, remote_factory: Callable) -> Remote:
    """Each scheme in turn, on its real server."""
    return remote_factory(request.param)


@pytest.fixture(params=REMOTE_SCHEMES)
def cloud(request: pytest.FixtureRequest, remote_factory: Callable) -> Remote:
    """Each remote (non-local) scheme in turn, on its real server."""
    return remote_factory(request.param)
