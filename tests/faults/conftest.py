"""Fault-injection tests: real servers, in an environment without the machine's credentials."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def isolated_environment(credential_free_environment: None) -> Iterator[None]:
    """Every fault test runs without the machine's credentials (see `credential_free_environment`)."""
    yield
