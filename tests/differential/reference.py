"""The test side of the reference worker: find the reference interpreter, start the worker, call operations."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tests.differential.reference_worker import _receive, _send

REFERENCE_PYTHON_VARIABLE = "MDS_REFERENCE_PYTHON"
HOW_TO_CREATE = (
    f"The differential tests compare this package with streaming-community 0.14.2 installed in its own "
    f"virtualenv. Create it once with `BENCH_REF_SPARK=0 bash benchmarks/setup_ref.sh .venv-ref` (or run "
    f"`make test`, which does), then set {REFERENCE_PYTHON_VARIABLE}=$PWD/.venv-ref/bin/python."
)
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_worker.py")


class ReferenceCrash(AssertionError):
    """An operation raised inside the reference worker where it should have returned a result."""


def reference_python() -> str:
    """The reference virtualenv's python from the environment; raise (never skip) with how to make one."""
    python = os.environ.get(REFERENCE_PYTHON_VARIABLE)
    if not python:
        raise RuntimeError(f"{REFERENCE_PYTHON_VARIABLE} is not set. {HOW_TO_CREATE}")
    if not os.access(python, os.X_OK):
        raise RuntimeError(f"{REFERENCE_PYTHON_VARIABLE}={python} is not an executable. {HOW_TO_CREATE}")
    return python


class ReferenceWorker:
    """One reference worker process, fed operations one at a time (see ``reference_worker.py``).

    The process starts at construction but is waited for only by :meth:`ready` (or the first call), so that its
    imports (torch: seconds) overlap with whatever the test session does meanwhile.
    """

    def __init__(self, python: str) -> None:
        self.python = python
        environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        self.process = subprocess.Popen(
            [python, "-I", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
            env=environment,
        )
        self._hello: dict[str, str] | None = None

    def ready(self) -> dict[str, str]:
        """Wait for the worker's hello: ``{"streaming": streaming.__file__, "version": ...}`` of the reference."""
        if self._hello is None:
            hello = _receive(self.process.stdout)
            if hello is None:
                raise RuntimeError(f"the reference worker ({self.python}) exited before saying hello (see stderr)")
            self._hello = hello
        return self._hello

    def call(self, name: str, **kwargs: Any) -> Any:
        """Run ``operations.<name>(**kwargs)`` in the reference and return its result."""
        self.ready()
        _send(self.process.stdin, (name, kwargs))
        reply = _receive(self.process.stdout)
        if reply is None:
            raise RuntimeError(f"the reference worker died during {name} (exit code {self.process.wait()})")
        status, value = reply
        if status == "crash":
            raise ReferenceCrash(f"reference {name} failed:\n{value}")
        return value

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
