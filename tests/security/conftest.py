"""Helpers of the security tests: a second local user, simulated by a forked child that drops to another uid."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

#: The uid the "other local user" runs as (nobody).
OTHER_UID = 65534


def require_root() -> None:
    """Fail under CI (``CI`` set), else skip saying why, when no second local user can be simulated (not root)."""
    if os.getuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI must run as root: the second-local-user tests need os.setuid")
        pytest.skip("simulating a second local user needs root (os.setuid in a forked child); CI runs as root")


def as_other_user(action: Callable[[], None]) -> None:
    """Run ``action`` in a forked child as another local user (``os.setuid``); needs root.

    Without root no second user can be simulated: the test is skipped, saying why (CI runs as root, so
    there it always runs).
    """
    require_root()
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


def shared_dir(path: str) -> str:
    """A folder every local user may write to without /tmp's sticky bit (a team's shared folder): another user
    may rename, replace or delete what is in it, and the kernel's protected_symlinks rule (sticky folders
    only) does not stop a link they plant there from being followed."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o777)
    for parent in _parents(path):
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
    return path


def group_writable_dir(path: str) -> str:
    """A folder of this user's that its group may write to (0770), the group being the other user's own
    (``OTHER_UID``'s primary group, which ``as_other_user`` runs in): a team folder both users share through
    their group, never open to everyone."""
    os.makedirs(path, exist_ok=True)
    os.chown(path, os.getuid(), OTHER_UID)
    os.chmod(path, 0o770)
    for parent in _parents(path):
        os.chmod(parent, os.stat(parent).st_mode | 0o001)  # let the other user reach it
    return path


def share_tree(path: str) -> None:
    """Make every folder below ``path`` writable and every file readable and writable by every user."""
    for folder, _, files in os.walk(path):
        os.chmod(folder, 0o777)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o666)


class Outcome(NamedTuple):
    """How a forked child's call ended: ``kind`` is ok, error, signal or timeout; ``detail`` says more."""

    kind: str
    detail: str


def in_child(action: Callable[[], object], timeout: float = 30.0) -> Outcome:
    """Run ``action`` in a forked child and report how it ended, killing it after ``timeout`` seconds.

    For what would hang (a FIFO opened for reading) or kill (SIGBUS) the test process itself.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = action()
            message = json.dumps(["ok", repr(result)[:2000]])
        except BaseException as err:  # reported to the parent
            message = json.dumps(["error", f"{type(err).__name__}: {err}"[:4000]])
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        return Outcome("timeout", f"still running after {timeout:.0f} s")
    with os.fdopen(read) as pipe:
        text = pipe.read()
    if os.WIFSIGNALED(status):
        return Outcome("signal", signal.Signals(os.WTERMSIG(status)).name)
    kind, detail = json.loads(text)
    return Outcome(kind, detail)


def world_writable_dir(path: str) -> str:
    """A folder every local user may write to, like /tmp (sticky)."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o1777)
    for parent in _parents(path):
        os.chmod(parent, os.stat(parent).st_mode | 0o011)  # let the other user reach it
    return path


@pytest.fixture(scope="session")
def _second_user_root() -> Iterator[str]:
    """The folder that holds this directory's `tmp_path`s, made in the temporary directory, removed at the end."""
    root = tempfile.mkdtemp(prefix="mds-security-tests-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(_second_user_root: str, request: pytest.FixtureRequest) -> Path:
    """A fresh folder per test, outside pytest's ``pytest-of-<user>``: the other user must pass through its parents.

    `shared_dir` opens the parents of a shared folder to other users, but every pytest session that starts (the CI
    lanes run several at once) makes ``pytest-of-<user>`` private again, so the other user's setup failed now and
    then with a folder below it (seen once in a fresh-clone CI run).
    """
    name = "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_second_user_root))


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
