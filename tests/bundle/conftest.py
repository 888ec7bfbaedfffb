"""Fixtures of the bundle tests: the real `databricks` CLI, a copy of the checkout to deploy from, and the stand-in
workspace (`tests/servers/fake_workspace.py`) it deploys to.

The CLI is `$DATABRICKS_CLI`, else `databricks` on PATH (`.ci/run` sets `DATABRICKS_CLI`). Without one the tests
skip on a developer's machine and fail in CI (`CI` set), so CI never passes without having run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.services import SERVERS, Service, free_port, start_service

REPO = Path(__file__).resolve().parents[2]
# The principals of the stand-in workspace: a user (its userName is its email) and a service principal (its
# userName is its application id), each with its own token.
USER = "dev.user@example.com"
USER_TOKEN = "dapi-user-token"
SERVICE_PRINCIPAL = "6a1e3f52-2b7c-4c1e-9d0b-1f2e3d4c5b6a"
SERVICE_PRINCIPAL_TOKEN = "dapi-sp-token"
VOLUME = "main.default.mds_demo"  # the volume the bundle's artifact_volume and datasets lie in
TABLE = "main.default.mds_demo_events"  # the bundle's default table
# What deploying builds the wheel from: the bundle, the notebooks it syncs and the package's sources.
CHECKOUT_PARTS = ("bundle", "notebooks", "streaming", "pyproject.toml", "README.md")


def ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def databricks_cli() -> str:
    """The real Databricks CLI's path: `$DATABRICKS_CLI`, else `databricks` on PATH; in CI, a missing one fails."""
    given = os.environ.get("DATABRICKS_CLI")
    path = given or shutil.which("databricks")
    if not path or not os.access(path, os.X_OK):
        reason = (
            f"DATABRICKS_CLI={given} is no executable"
            if given
            else "no Databricks CLI: set DATABRICKS_CLI or put `databricks` (v1.13.0 or later) on PATH"
        )
        if ci():
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@dataclass
class Workspace:
    """A running stand-in workspace and the way to run the CLI against it."""

    service: Service
    cli: str
    home: Path

    @property
    def root(self) -> Path:
        """Where the workspace's volumes lie on this disk (`/Volumes/c/s/v/x` is `root/Volumes/c/s/v/x`)."""
        return self.service.extra["root"]  # type: ignore[return-value]

    def run(self, args: list[str], token: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`databricks ARGS` as the principal of `token`, with nothing of this machine's own configuration."""
        environment = {
            name: value for name, value in os.environ.items() if not name.startswith(("DATABRICKS_", "BUNDLE_"))
        }
        environment.update(
            DATABRICKS_HOST=self.service.endpoint,
            DATABRICKS_TOKEN=token,
            DATABRICKS_BUNDLE_ENGINE="direct",
            DATABRICKS_CONFIG_FILE=str(self.home / "databrickscfg"),
            HOME=str(self.home),
            TMPDIR=str(self.home),  # the CLI's and the wheel build's scratch files, gone with the test's folder
            # pip's cache stays the machine's: the artifact build fetches its build backend once, not every deploy.
            PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"),
            # The bundle's artifact build runs `python3 -m pip wheel`: this interpreter's, which has pip.
            PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        )
        done = subprocess.run(
            [self.cli, *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=600, check=False
        )
        if check and done.returncode != 0:
            runs = "".join(
                f"\n--- {log.name} (the job run's notebook output) ---\n{log.read_text(errors='replace')[-6000:]}"
                for log in sorted(self.service.log.parent.glob("run-*.log"))
            )
            pytest.fail(f"databricks {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}{runs}")
        return done

    def api(self, method: str, path: str, token: str, body: bytes | None = None) -> bytes:
        """One request to the workspace's REST API (what the CLI left behind is read this way)."""
        request = urllib.request.Request(
            self.service.endpoint + path,
            data=body,
            method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.read()

    def refusal(self, method: str, path: str, token: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
        """The status and error body of a request the workspace must refuse (the test fails if it answers 2xx)."""
        try:
            self.api(method, path, token, body)
        except urllib.error.HTTPError as refused:
            with refused:
                return refused.code, json.loads(refused.read())
        pytest.fail(f"{method} {path} was accepted")


@pytest.fixture
def workspace_factory(
    databricks_cli: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Workspace]]:
    """Start stand-in workspaces: `factory(cloud="aws", volumes=(VOLUME,), owners=(USER,), tables={})`."""
    started: list[Service] = []

    def start(
        cloud: str = "aws",
        volumes: tuple[str, ...] = (VOLUME,),
        owners: tuple[str, ...] = (USER,),
        tables: dict[str, Path] | None = None,
    ) -> Workspace:
        workdir = tmp_path_factory.mktemp("fake_workspace")
        port = free_port()
        argv = [sys.executable, str(SERVERS / "fake_workspace.py"), str(port), str(workdir / "root")]
        argv += [
            "--user",
            f"{USER_TOKEN}={USER}",
            "--service-principal",
            f"{SERVICE_PRINCIPAL_TOKEN}={SERVICE_PRINCIPAL}",
        ]
        argv += ["--group", "admins=" + ",".join(owners), "--schema", "main.default", "--cloud", cloud]
        argv += ["--notebook-runner", str(REPO / "notebooks" / "run_local.py"), "--runner-venv", str(workdir / "venv")]
        for volume in volumes:
            argv += ["--volume", volume]
        for name, location in (tables or {}).items():
            argv += ["--table", f"{name}={location}"]
        service = start_service(
            "fake-workspace",
            argv,
            port,
            workdir,
            lambda: _answers(f"http://127.0.0.1:{port}/.well-known/databricks-config"),
            # The job runs' scratch files (their notebook's copy, Spark's local folders) stay in the server's folder.
            env={"SPARK_LOCAL_IP": "127.0.0.1", "TMPDIR": str(workdir)},
        )
        service.extra["root"] = workdir / "root"
        started.append(service)
        return Workspace(service, databricks_cli, tmp_path_factory.mktemp("cli_home"))

    yield start
    for service in started:
        service.stop()


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of what deploying needs from this checkout (the CLI builds the wheel and keeps its state there)."""
    for part in CHECKOUT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__", ".databricks"))
        else:
            shutil.copy2(source, tmp_path / part)
    return tmp_path
