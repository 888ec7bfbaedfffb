"""Run a Databricks source-format notebook on this machine, unmodified, cell by cell.

    python notebooks/run_local.py NOTEBOOK [--widget name=value ...] [--in-place]

The notebook sees what a Databricks notebook sees: ``spark`` (a local SparkSession), ``dbutils`` (widgets,
``notebook.exit``, ``library.restartPython``), ``display`` and ``displayHTML``. ``%md`` cells are printed;
any magic other than ``%md`` and ``%pip`` stops the run. Widget values given with ``--widget`` replace the
defaults the notebook declares, as job parameters do.

``%pip`` cells install for real, as on a cluster, into a throwaway virtualenv: the command line run creates
one in a temporary folder and runs the notebook in its interpreter (Spark's Python workers included), and
each ``%pip`` cell runs ``pip`` there, with ``$name`` replaced by the notebook's variable ``name`` as IPython
does. So ``--widget install=dist/mds_streaming-<version>-py3-none-any.whl`` runs a notebook on the built
wheel exactly as a user's ``%pip install`` would. The virtualenv sees the packages of the interpreter that
started it (pyspark, torch, ...: nothing is downloaded again) except this project's own, so ``streaming`` is
the one ``%pip`` installed. ``--venv FOLDER`` uses (and first creates) that virtualenv instead of a temporary
one and keeps it, so several runs share one install (as notebooks attached to one cluster do); the tests
run every notebook so. ``--in-place`` (and ``run_notebook`` called from Python, as the tests do with their own
session) runs in the current interpreter and prints ``%pip`` cells instead of running them.

``--access-mode`` says which compute the run stands in for, and Spark's Python workers (the executors) get
only what that compute gives its executors (see ``streaming.spark.executor_access``):

* ``local`` (the default): a Spark session off Databricks, as on a laptop. Local executors are this machine's
  processes and see its environment, ``DATABRICKS_*`` included.
* ``classic``: a dedicated (single user) cluster. The notebook sees what Databricks sets on a driver
  (``DATABRICKS_RUNTIME_VERSION``, the cluster tag ``spark.databricks.clusterUsageTags.dataSecurityMode``); the
  executors have no ``DATABRICKS_*`` (the notebook's context is the driver's), but keep the machine's cloud
  credentials, as a cluster's instance profile or environment gives them.
* ``standard``: a standard (shared) access mode cluster. Tasks are sandboxed: no workspace credentials and no storage
  credentials (``AWS_ACCESS_KEY_ID``, ``AZURE_STORAGE_CONNECTION_STRING``, ... : ``STORAGE_CREDENTIALS``), the
  network and storage settings (endpoints, regions) otherwise there.
* ``serverless``: serverless compute (``IS_SERVERLESS=TRUE``, ``DATABRICKS_RUNTIME_VERSION=client.<n>``). Tasks have
  no credentials and no network: any TCP or UDP connection they open fails.

The executors' side is made by a ``sitecustomize`` module on their ``PYTHONPATH`` that, at worker start, removes
the variables and (serverless) blocks ``socket.connect``: a stand-in for the platform's sandbox in Python code,
which holds for the package's own clients (requests, boto3, the Azure and Google SDKs). Only ``/Volumes`` paths
mounted on this machine stay reachable in every mode, as on Databricks. Tests import ``run_notebook`` and pass
their own session.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import traceback
import venv
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HEADER = "# Databricks notebook source"
SEPARATOR = "# COMMAND ----------"
MAGIC_PREFIX = "# MAGIC"
PRINTED_MAGICS = ("md", "pip")
ACCESS_MODES = ("local", "classic", "standard", "serverless")
WORKSPACE_VARIABLES = ("DATABRICKS_",)
#: Storage settings (endpoints, regions, switches) and credentials, by name or prefix ...
STORAGE_VARIABLES = ("AWS_", "S3_", "AZURE_", "GOOGLE_", "GCS_", "STORAGE_EMULATOR_HOST", "OCI_", "HF_", "NO_GCE_CHECK")
#: ... of which these are credentials (the rest are settings a sandbox leaves alone).
STORAGE_CREDENTIALS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_ACCOUNT_ACCESS_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GCS_KEY",
    "GCS_SECRET",
    "OCI_CONFIG_FILE",
    "HF_TOKEN",
    "COMPOSER_SFTP_KEY_FILE",
)
#: Environment variables (names or prefixes) of the driver each mode's executors have too: on a laptop all of them;
#: on a cluster the storage settings, and on a classic one its storage credentials (an instance profile's or the
#: cluster environment's), but never the workspace's (the notebook's context is the driver's).
GIVEN_TO_EXECUTORS = {
    "local": WORKSPACE_VARIABLES + STORAGE_VARIABLES,
    "classic": STORAGE_VARIABLES,
    "standard": STORAGE_VARIABLES,
    "serverless": STORAGE_VARIABLES,
}
#: ... and the ones they lose, whatever the worker processes inherited.
HIDDEN_FROM_EXECUTORS = {
    "classic": WORKSPACE_VARIABLES,
    "standard": WORKSPACE_VARIABLES + STORAGE_CREDENTIALS,
    "serverless": WORKSPACE_VARIABLES + STORAGE_CREDENTIALS,
}
#: What Databricks shows the driver: environment variables and Spark settings (the runtime as the pyspark line's).
DRIVER_MARKERS = {
    "classic": ({"DATABRICKS_RUNTIME_VERSION": "{runtime}"}, {"dataSecurityMode": "SINGLE_USER"}),
    "standard": ({"DATABRICKS_RUNTIME_VERSION": "{runtime}"}, {"dataSecurityMode": "USER_ISOLATION"}),
    "serverless": ({"DATABRICKS_RUNTIME_VERSION": "client.4", "IS_SERVERLESS": "TRUE"}, {}),
}
CLUSTER_TAG_PREFIX = "spark.databricks.clusterUsageTags."
EXECUTOR_MODE_ENV = "RUN_LOCAL_EXECUTOR_MODE"
#: Set in the notebook's process while ``run_notebook`` runs it, to the access mode it stands in for.
LOCAL_RUN_ENV = "RUN_LOCAL_ACCESS_MODE"
#: The executors' side of a mode, run by every Python worker at start (it is their ``sitecustomize``).
EXECUTOR_SANDBOX = """\
import errno, os, socket

_mode = os.environ.pop({mode_env!r}, "")
_hidden = {hidden!r}.get(_mode, ())
for _name in [name for name in os.environ if name.startswith(_hidden)]:
    del os.environ[_name]
if _mode == "serverless":
    _connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex

    def _refuse(sock):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            raise OSError(errno.ENETUNREACH, "serverless executor (run_local): UDFs cannot access the internet")

    def connect(self, address):
        _refuse(self)
        return _connect(self, address)

    def connect_ex(self, address):
        _refuse(self)
        return _connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
"""
#: Set to the throwaway virtualenv's folder for the run inside it; only there do ``%pip`` cells run.
THROWAWAY_VENV_ENV = "RUN_LOCAL_VENV"
#: Entries of the starting interpreter's site-packages the throwaway virtualenv does not see: this project's
#: own installs (an editable one included) and ``.pth`` hooks, so ``import streaming`` finds what ``%pip`` put there.
HIDDEN_SITE_ENTRIES = re.compile(r"^(streaming|mds_streaming-.*|__editable__.*mds_streaming.*|.*\.pth)$", re.I)


@dataclass(frozen=True)
class Cell:
    """One notebook cell: its 1-based number, first line in the file, and source (magic cells unprefixed)."""

    number: int
    line: int
    source: str
    magic: str | None = None


def parse_notebook(text: str, name: str) -> list[Cell]:
    """Split a source-format notebook into cells; ``name`` is used in errors."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise ValueError(f"{name} is not a Databricks source-format notebook: its first line must be {HEADER!r}.")
    cells: list[Cell] = []
    start, body = 2, []
    for number, line in enumerate(lines[1:] + [SEPARATOR], start=2):
        if line.strip() != SEPARATOR:
            body.append(line)
            continue
        cell = _make_cell(len(cells) + 1, start, body)
        if cell is not None:
            cells.append(cell)
        start, body = number + 1, []
    return cells


def _make_cell(number: int, line: int, body: list[str]) -> Cell | None:
    while body and not body[0].strip():
        body, line = body[1:], line + 1
    while body and not body[-1].strip():
        body = body[:-1]
    if not body:
        return None
    if all(text.startswith(MAGIC_PREFIX) for text in body):
        unprefixed = [text[len(MAGIC_PREFIX) :].removeprefix(" ") for text in body]
        first = unprefixed[0].strip()
        magic = first.split()[0].lstrip("%") if first.startswith("%") else "md"
        return Cell(number, line, "\n".join(unprefixed), magic)
    return Cell(number, line, "\n".join(body))


class NotebookExit(Exception):
    """Raised by ``dbutils.notebook.exit``: the run stops there and returns ``value``."""

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self.value = value


class Widgets:
    """``dbutils.widgets``: declared defaults, replaced by the values the run was given."""

    def __init__(self, given: Mapping[str, str]) -> None:
        self._given = {str(k): str(v) for k, v in given.items()}
        self._declared: dict[str, str] = {}
        self._choices: dict[str, list[str]] = {}

    def _declare(self, name: str, default: str, choices: Sequence[str] | None = None) -> None:
        self._declared[name] = str(default)
        if choices is not None:
            self._choices[name] = [str(choice) for choice in choices]
            value = self._given.get(name, str(default))
            if value not in self._choices[name]:
                raise ValueError(f"Widget {name!r}: {value!r} is not one of its choices {self._choices[name]}.")

    def text(self, name: str, defaultValue: str, label: str | None = None) -> None:
        self._declare(name, defaultValue)

    def dropdown(
        self,
        name: str,
        defaultValue: str,
        choices: Sequence[str],
        label: str | None = None,
    ) -> None:
        self._declare(name, defaultValue, choices)

    def combobox(
        self,
        name: str,
        defaultValue: str,
        choices: Sequence[str],
        label: str | None = None,
    ) -> None:
        self._declare(name, defaultValue)

    def get(self, name: str) -> str:
        if name in self._given:
            return self._given[name]
        if name in self._declared:
            return self._declared[name]
        known = sorted(set(self._declared) | set(self._given))
        raise ValueError(f"InputWidgetNotDefined: no input widget named {name!r} is defined; defined: {known}.")

    def getArgument(self, name: str, default: str | None = None) -> str | None:
        try:
            return self.get(name)
        except ValueError:
            return default

    def getAll(self) -> dict[str, str]:
        return {**self._declared, **self._given}

    def remove(self, name: str) -> None:
        self._declared.pop(name, None)
        self._choices.pop(name, None)

    def removeAll(self) -> None:
        self._declared.clear()
        self._choices.clear()

    def unused(self) -> list[str]:
        """Values given for widgets the notebook never declared (usually a typo on the command line)."""
        return sorted(set(self._given) - set(self._declared))


class _NotebookUtils:
    def exit(self, value: Any) -> None:
        raise NotebookExit(str(value))


class _LibraryUtils:
    def restartPython(self) -> None:
        importlib.invalidate_caches()  # what %pip installed is importable from the next cell on
        print("[run_local] dbutils.library.restartPython(): import caches refreshed")


@dataclass
class DBUtils:
    """The parts of ``dbutils`` these notebooks use."""

    widgets: Widgets
    notebook: _NotebookUtils = field(default_factory=_NotebookUtils)
    library: _LibraryUtils = field(default_factory=_LibraryUtils)


def display(obj: Any, *args: Any, **kwargs: Any) -> None:
    """Print a DataFrame's first rows, a pandas frame, or anything else as it prints."""
    if hasattr(obj, "show") and hasattr(obj, "schema"):
        obj.show(20, truncate=80)
    elif hasattr(obj, "to_string"):
        print(obj.to_string())
    else:
        print(obj)


def display_html(html: str) -> None:
    print(html)


#: The oldest Java the Spark of this machine's pyspark 4 runs on (Spark 3.5 runs on 8 to 17; 4.x needs 17 or 21).
JAVA_FLOOR = 17
JAVA_INSTALL = "apt-get install openjdk-17-jre-headless (Debian, Ubuntu) or brew install openjdk@17 (macOS)"


def java_problem() -> str | None:
    """Why Spark cannot start on this machine's Java, in one sentence naming the fix; None when Java will do.

    Spark finds Java as pyspark does: ``$JAVA_HOME/bin/java``, else ``java`` on the PATH. Without it, a session ends
    in ``JAVA_GATEWAY_EXITED`` after the whole install, so the demo asks first.
    """
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    where = f"in JAVA_HOME={home}" if home else "on the PATH"
    if java is None or not os.path.isfile(java):
        return f"Spark needs Java {JAVA_FLOOR} or later and there is no java {where}: install it with {JAVA_INSTALL}."
    try:
        answer = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired) as err:
        return (
            f"Spark needs Java {JAVA_FLOOR} or later and {java} does not run ({err}): install it with {JAVA_INSTALL}."
        )
    found = re.search(r'version "(\d+)(?:\.(\d+))?', answer)
    major = int(found.group(2) if found and found.group(1) == "1" else found.group(1)) if found else 0
    if major < JAVA_FLOOR:
        return (
            f"Spark needs Java {JAVA_FLOOR} or later and {java} is Java {major or 'of an unknown version'}: install "
            f"it with {JAVA_INSTALL}, and set JAVA_HOME to it if another Java comes first."
        )
    return None


def local_spark() -> Any:
    """The active SparkSession, or a new local one on loopback using this Python for its workers."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    # Spark's scratch files go where this process's do (TMPDIR: `make demo` keeps them in its outputs folder); the
    # variable rather than spark.local.dir, which Spark warns about.
    os.environ.setdefault("SPARK_LOCAL_DIRS", tempfile.gettempdir())
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    problem = java_problem()
    if problem is not None:
        raise RuntimeError(problem)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("run_local")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={tempfile.gettempdir()}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def runtime_version() -> str:
    """The Databricks Runtime LTS of this pyspark line (15.4 LTS runs Spark 3.5, 17.3 LTS Spark 4.0)."""
    import pyspark

    return "15.4" if pyspark.__version__.startswith("3.") else "17.3"


@contextlib.contextmanager
def compute_mode(spark: Any, mode: str) -> Iterator[None]:
    """Make ``spark``'s driver and executors look like ``mode``'s (see the module docstring) while the block runs."""
    if mode not in ACCESS_MODES:
        raise ValueError(f"Unknown access mode {mode!r}; choose one of {', '.join(ACCESS_MODES)}.")
    try:
        environment = spark.sparkContext.environment
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext; its server has its own environment
        if mode != "local":
            raise ValueError(
                f"--access-mode {mode} needs a classic SparkSession (its executors are simulated)"
            ) from None
        yield
        return
    variables, tags = DRIVER_MARKERS.get(mode, ({}, {}))
    driver = {name: value.format(runtime=runtime_version()) for name, value in variables.items()}
    # Handed over explicitly: a session started before the variables were set has not passed them on.
    given = GIVEN_TO_EXECUTORS[mode]
    workers = {name: value for name, value in os.environ.items() if given and name.startswith(given)}
    if mode != "local":
        folder = tempfile.mkdtemp(prefix="run_local-executors-")
        with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as file:
            file.write(EXECUTOR_SANDBOX.format(mode_env=EXECUTOR_MODE_ENV, hidden=HIDDEN_FROM_EXECUTORS))
        workers[EXECUTOR_MODE_ENV] = mode
        workers["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, environment.get("PYTHONPATH")]))
    settings = {CLUSTER_TAG_PREFIX + key: value for key, value in tags.items()}
    if mode in ("classic", "standard"):
        settings[CLUSTER_TAG_PREFIX + "clusterId"] = "run-local-cluster"
    saved_env = {name: os.environ.get(name) for name in driver}
    saved_workers = {name: environment.get(name) for name in workers}
    saved_settings = {key: spark.conf.get(key, None) for key in settings}
    os.environ.update(driver)
    environment.update(workers)
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        _restore(os.environ, saved_env)
        _restore(environment, saved_workers)
        for key, value in saved_settings.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        if mode != "local":
            shutil.rmtree(folder, ignore_errors=True)


def _restore(mapping: Any, saved: Mapping[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            mapping.pop(name, None)
        else:
            mapping[name] = value


@dataclass
class NotebookRun:
    """The outcome of a run: the notebook's globals and the value passed to ``dbutils.notebook.exit``."""

    namespace: dict[str, Any]
    exit_value: str | None


def run_notebook(
    path: str,
    widgets: Mapping[str, str] | None = None,
    spark: Any = None,
    quiet: bool = False,
    access_mode: str = "local",
) -> NotebookRun:
    """Execute the notebook at ``path`` cell by cell in one namespace and return the run's outcome.

    Args:
        path: a Databricks source-format ``.py`` notebook.
        widgets: widget values, replacing the notebook's defaults.
        spark: the session to provide as ``spark`` (default: ``local_spark()``).
        quiet: do not print cell banners and ``%md`` text.
        access_mode: the compute the run stands in for (``ACCESS_MODES``; see the module docstring).
    """
    with open(path, encoding="utf-8") as file:
        cells = parse_notebook(file.read(), path)
    session = spark if spark is not None else local_spark()
    given = Widgets(widgets or {})
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__file__": os.path.abspath(path),
        "spark": session,
        "dbutils": DBUtils(given),
        "display": display,
        "displayHTML": display_html,
    }
    exit_value = None
    # Whatever compute the run stands in for, there is no Unity Catalog here: the notebooks read this to keep their
    # demo table and datasets in a local folder rather than under /Volumes and in catalog `main`.
    saved = os.environ.get(LOCAL_RUN_ENV)
    os.environ[LOCAL_RUN_ENV] = access_mode
    with contextlib.ExitStack() as restore, compute_mode(session, access_mode):
        restore.callback(_restore, os.environ, {LOCAL_RUN_ENV: saved})
        for cell in cells:
            if not quiet:
                print(f"\n── {os.path.basename(path)} · cell {cell.number}/{len(cells)} (line {cell.line}) ──")
            if cell.magic is not None:
                _run_magic(cell, path, quiet, namespace)
                continue
            code = compile("\n" * (cell.line - 1) + cell.source, path, "exec")
            try:
                exec(code, namespace)  # noqa: S102 - running the notebook is this tool's job
            except NotebookExit as stop:
                exit_value = stop.value
                break
    if given.unused():
        print(f"[run_local] warning: widget values given but never declared: {given.unused()}", file=sys.stderr)
    return NotebookRun(namespace, exit_value)


def _run_magic(cell: Cell, path: str, quiet: bool, namespace: Mapping[str, Any]) -> None:
    if cell.magic not in PRINTED_MAGICS:
        raise ValueError(
            f"{path}, cell {cell.number} (line {cell.line}): the %{cell.magic} magic cannot run "
            f"locally; supported: {', '.join('%' + m for m in PRINTED_MAGICS)}."
        )
    if cell.magic == "pip" and in_throwaway_venv():
        _run_pip(cell, path, namespace)
    elif cell.magic == "pip":
        print(f"[run_local] skipped: {cell.source.strip()}")
    elif not quiet:
        print(cell.source.removeprefix("%md").strip())


def expand_variables(command: str, namespace: Mapping[str, Any]) -> str:
    """``$name`` → the notebook variable ``name`` (as IPython expands magics); unknown names stay as written."""
    return re.sub(r"\$(\w+)", lambda m: str(namespace[m[1]]) if m[1] in namespace else m[0], command)


def _run_pip(cell: Cell, path: str, namespace: Mapping[str, Any]) -> None:
    arguments = shlex.split(expand_variables(cell.source.strip(), namespace))[1:]
    print(f"[run_local] {sys.prefix}: pip {shlex.join(arguments)}", flush=True)
    command = [sys.executable, "-m", "pip", *arguments, "--disable-pip-version-check", "--no-input"]
    if subprocess.run(command, check=False).returncode != 0:
        raise RuntimeError(f"{path}, cell {cell.number} (line {cell.line}): pip {shlex.join(arguments)} failed.")


def in_throwaway_venv() -> bool:
    """Whether this interpreter is the throwaway virtualenv a command line run made (where %pip may install)."""
    folder = os.environ.get(THROWAWAY_VENV_ENV)
    return folder is not None and os.path.realpath(folder) == os.path.realpath(sys.prefix)


def create_throwaway_venv(folder: str) -> str:
    """A virtualenv in ``folder`` that sees this interpreter's packages but not this project; its python's path.

    pip is this interpreter's (found through the shared packages), so creating it takes no download.
    """
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    python = os.path.join(folder, "bin", "python")
    own_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shared = os.path.join(folder, "shared-site-packages")
    os.makedirs(shared)
    import site

    for parent in site.getsitepackages():
        for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
            target = os.path.join(shared, name)
            if not HIDDEN_SITE_ENTRIES.match(name) and not os.path.lexists(target):
                os.symlink(os.path.join(parent, name), target)
    with open(os.path.join(own_site, "_run_local_shared.pth"), "w", encoding="utf-8") as file:
        file.write(shared + "\n")
    return python


def run_in_throwaway_venv(argv: Sequence[str]) -> int:
    """Run this script with ``argv`` inside a fresh throwaway virtualenv, which is deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix="run_local-venv-") as folder:
        python = create_throwaway_venv(folder)
        print(f"[run_local] running in a throwaway virtualenv: {folder}", flush=True)
        return _run_in(folder, python, argv)


def run_in_kept_venv(folder: str, argv: Sequence[str]) -> int:
    """Run this script with ``argv`` inside the virtualenv ``folder`` (created first if missing), which stays."""
    folder = os.path.abspath(folder)
    python = os.path.join(folder, "bin", "python")
    if not os.path.exists(python):
        python = create_throwaway_venv(folder)
    print(f"[run_local] running in the kept virtualenv: {folder}", flush=True)
    return _run_in(folder, python, argv)


def _run_in(folder: str, python: str, argv: Sequence[str]) -> int:
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    environment[THROWAWAY_VENV_ENV] = folder
    return subprocess.run([python, os.path.abspath(__file__), *argv], env=environment, check=False).returncode


def parse_widget_arguments(pairs: Sequence[str]) -> dict[str, str]:
    """``["name=value", ...]`` → ``{name: value}`` (the value may contain ``=`` and be empty)."""
    values = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--widget expects name=value, got {pair!r}.")
        values[name] = value
    return values


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description="Run a Databricks source-format notebook locally, cell by cell.")
    parser.add_argument("notebook", nargs="?", help="path of the notebook (.py, Databricks source format)")
    parser.add_argument(
        "--check-java",
        action="store_true",
        help="only check that this machine's Java can run Spark (what `make demo` does before installing anything)",
    )
    parser.add_argument(
        "--widget",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a widget value (repeatable); replaces the notebook's default",
    )
    parser.add_argument(
        "--venv",
        metavar="FOLDER",
        help="run in this virtualenv (created if missing, kept afterwards) instead of a temporary one",
    )
    parser.add_argument(
        "--access-mode",
        choices=ACCESS_MODES,
        default="local",
        help="the compute to stand in for: what the notebook sees, and what the Spark executors get (default: local)",
    )
    parser.add_argument(
        "--in-place",
        action="store_true",
        help="run in this interpreter and print %%pip cells instead of installing into a throwaway virtualenv",
    )
    args = parser.parse_args(arguments)
    if args.check_java:
        problem = java_problem()
        print(problem or "[run_local] Java can run Spark.", file=sys.stderr if problem else sys.stdout)
        return 1 if problem else 0
    if args.notebook is None:
        parser.error("the notebook to run is required")
    try:
        widgets = parse_widget_arguments(args.widget)
    except ValueError as err:
        parser.error(str(err))
    if not args.in_place and not in_throwaway_venv():
        return run_in_kept_venv(args.venv, arguments) if args.venv else run_in_throwaway_venv(arguments)
    from pyspark.sql import SparkSession

    owned = SparkSession.getActiveSession() is None
    spark = local_spark()
    try:
        run = run_notebook(args.notebook, widgets, spark, access_mode=args.access_mode)
    except Exception:  # noqa: BLE001 - report the failing cell's traceback, then fail the command
        traceback.print_exc()
        print(f"[run_local] {args.notebook} failed.", file=sys.stderr)
        return 1
    finally:
        if owned:
            spark.stop()
    if run.exit_value is not None:
        print(f"[run_local] dbutils.notebook.exit: {run.exit_value}")
    print(f"[run_local] {args.notebook} ran to completion.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
