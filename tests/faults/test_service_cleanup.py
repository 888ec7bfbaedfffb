"""The test servers do not outlive a test run killed by a signal (`tests/services.py`: a parent-death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from tests.services import REPO

# A stand-in for a test process: starts a server as the fixtures do, prints its pid, then waits to be killed.
_RUN = textwrap.dedent(
    """
    import socket, sys
    from pathlib import Path
    from tests.services import free_port, start_service

    port = free_port()
    def ready():
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0
    server = start_service(
        "http", [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], port,
        Path(sys.argv[1]), ready,
    )
    print(server.process.pid, flush=True)
    sys.stdin.read()
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[1][0] != "Z"


def test_a_server_dies_with_the_test_process_that_started_it(tmp_path):
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUN, str(tmp_path)], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    server = int(runner.stdout.readline())
    assert _alive(server)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    deadline = time.monotonic() + 10
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server), f"server {server} outlived the killed test process"
