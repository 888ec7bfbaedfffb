"""Fault-injection tests: real servers, in an environment without the machine's credentials."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def isolated_environment(credential_free_environment: None, private_tempdir: str) -> Iterator[None]:
    """Every fault test runs without the machine's credentials (see `credential_free_environment`), and its
    temporary folders go into its own directory (`private_tempdir`)."""
    yield


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The suite's classic local SparkSession (`tests/spark/conftest.py`'s; started here if this directory runs first).

    Not stopped here: whichever fixture made it, `tests/spark`'s stops the one session at the end of the run.
    """
    from tests.spark.conftest import local_session

    return local_session(str(tmp_path_factory.mktemp("faults-warehouse")))
