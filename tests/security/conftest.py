"""Helpers of the security tests: a second local user, simulated by a forked child that drops to another uid."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import pytest

#: The uid the "other local user" runs as (nobody).
OTHER_UID = 65534


def as_other_user(action: Callable[[], None]) -> None:
    """Run ``action`` in a forked child as another local user (``os.setuid``); needs root.

    Without root no second user can be simulated: the test is skipped, saying why (CI runs as root, so
    there it always runs).
    """
    if os.getuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run as root: the second-local-user tests need os.setuid")
        pytest.skip("simulating a second local user needs root (os.setuid in a forked child); CI runs as root")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other user's setup failed"


def world_writable_dir(path: str) -> str:
    """A folder every local user may write to, like /tmp (sticky)."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o1777)
    for parent in _parents(path):
        os.chmod(parent, os.stat(parent).st_mode | 0o011)  # let the other user reach it
    return path


def _parents(path: str) -> list[str]:
    parents = []
    current = os.path.dirname(os.path.abspath(path))
    while current not in ("/", ""):
        parents.append(current)
        current = os.path.dirname(current)
    return parents


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print how many inputs each fuzzing target ran (the issue asks for at least 10,000 per CI run)."""
    targets = sys.modules.get("tests.security.fuzz_targets")
    if targets is None or not targets.RUNS:
        return
    counts = ", ".join(f"{name} {count:,}" for name, count in sorted(targets.RUNS.items()))
    terminalreporter.write_sep("-", "fuzzing inputs per target")
    terminalreporter.write_line(counts)
