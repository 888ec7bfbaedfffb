"""Start one child phase under a given interpreter and collect its result, whatever happens to it.

A child runs in its own process group with the scratch directory as working directory; its stdout
and stderr go to a log file. A timeout kills the whole group (DataLoader workers, a Spark JVM).
The returned dict always has `wall_s` and the 1-minute load average at the start (`loadavg_1m`);
a failure is an `error` string plus the log's tail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class Side:
    """An implementation under test: its interpreter and a PYTHONPATH that finds its package."""

    name: str
    python: str
    pythonpath: str = ""

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env


@dataclass(frozen=True)
class Workspace:
    """Directories shared by every child of a run."""

    scratch: str
    inputs: str
    logs: str


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [line.rstrip() for line in f if line.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])[-3000:]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_child(side: Side, phase: str, args: dict, workspace: Workspace, tag: str, timeout_s: float) -> dict:
    """Run `child.py phase` for one side; return its result dict (child failures do not raise)."""
    os.makedirs(workspace.logs, exist_ok=True)
    log_path = os.path.join(workspace.logs, f"{tag}.log")
    result_path = os.path.join(workspace.logs, f"{tag}.json")
    context = {"scratch": workspace.scratch, "inputs": workspace.inputs, "side": side.name}
    command = [
        side.python,
        CHILD,
        phase,
        "--context",
        json.dumps(context),
        "--args",
        json.dumps(args),
        "--result",
        result_path,
    ]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with open(log_path, "w") as log:
        try:
            process = subprocess.Popen(
                command,
                cwd=workspace.scratch,
                env=side.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return {"phase": phase, "error": f"cannot start {side.python}: {exc}", "wall_s": 0.0, "loadavg_1m": load}
        try:
            exit_code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.wait()
            exit_code = None
    wall_s = time.perf_counter() - start
    try:
        with open(result_path) as f:
            result = json.load(f)
    except (OSError, ValueError):
        reason = (
            f"timed out after {timeout_s:g} s"
            if exit_code is None
            else (f"exited with code {exit_code} before writing a result")
        )
        result = {"phase": phase, "error": f"child {reason}"}
    result.update(wall_s=wall_s, loadavg_1m=load)
    if exit_code != 0:
        result["exit_code"] = "timeout" if exit_code is None else exit_code
    if "error" in result:
        result["log_tail"] = _tail(log_path)
    return result
