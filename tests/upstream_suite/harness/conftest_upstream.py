"""Session setup (laid out as ``tests/conftest.py``) for the reference's test modules run against this package.

Asserts that ``streaming`` is this package (not the reference), registers the reference's marks, provides the
``tests.common.utils`` fixtures, and applies the thinning and the expected failures of the file that
``MDS_UPSTREAM_EXPECTATIONS`` names (strict: an expected failure that passes fails the run, so the list cannot go
stale).
"""

import os
from fnmatch import fnmatch
from pathlib import Path

import pytest
import tomllib

import streaming
from tests.common.utils import compressed_local_remote_dir, local_remote_dir

__all__ = ["compressed_local_remote_dir", "local_remote_dir"]

EXPECTED_PACKAGE_DIR = os.environ.get("MDS_UPSTREAM_PACKAGE_DIR", "")


def pytest_configure(config: pytest.Config) -> None:
    package_dir = Path(streaming.__file__).resolve().parent
    if EXPECTED_PACKAGE_DIR and package_dir != Path(EXPECTED_PACKAGE_DIR).resolve():
        raise pytest.UsageError(f"`streaming` resolves to {package_dir}, not the package under test")
    for mark in ("world_size(val): ranks of a distributed test", "daily: daily regression", "remote: needs a cloud"):
        config.addinivalue_line("markers", mark)


@pytest.hookimpl(tryfirst=True)  # before -m/--deselect drop items: every listed id must exist
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    expectations = os.environ.get("MDS_UPSTREAM_EXPECTATIONS")
    if not expectations:
        return
    exclusions = tomllib.loads(Path(expectations).read_text())
    patterns = [pattern.replace("[", "[[]") for pattern in exclusions["thinned"]]  # "[" of node ids is literal
    thinned = [item for item in items if any(fnmatch(item.nodeid, pattern) for pattern in patterns)]
    if thinned:
        config.hook.pytest_deselected(items=thinned)
        items[:] = [item for item in items if item not in thinned]
    expected_failures = exclusions["expected_failure"]
    matched = set()
    for item in items:
        key = item.nodeid if item.nodeid in expected_failures else item.nodeid.partition("[")[0]
        reason = expected_failures.get(key)
        if reason is not None:
            matched.add(key)
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    missing = sorted(set(expected_failures) - matched)
    if missing and config.args == ["tests"]:  # the whole suite collected: a stale entry is an error
        raise pytest.UsageError(f"Expected failures that no longer exist: {missing}")


@pytest.fixture(scope="session", autouse=True)
def placeholder_cloud_credentials() -> None:
    """Cloud clients are constructed (never used against a cloud) by some tests; they need some credentials."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN"):
        os.environ.setdefault(name, "testing")
    os.environ.setdefault("GCS_KEY", "testing")
    os.environ.setdefault("GCS_SECRET", "testing")
