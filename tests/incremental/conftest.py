"""Fixtures of the incremental-job tests: the suite's local SparkSession (reused when one is running).

Most of these tests need no Spark at all (a Delta path is read with delta-rs and written on the driver); those that
exercise the Spark reader's code, or that must also run against code which needs a session, take `spark`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.spark.conftest import local_session


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The suite's local SparkSession (reused when already running)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    session = local_session(str(tmp_path_factory.mktemp("warehouse")))
    yield session
    session.stop()
