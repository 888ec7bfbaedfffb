"""`ship_package`: make this package importable on Spark's Python workers that lack it, then check that it is.

A conversion's tasks import `streaming.spark.task` on Spark's Python workers, which are their own interpreters: a
cluster's, a Databricks Connect session's remote compute, or ``PYSPARK_PYTHON`` of a Spark of your own. This packs
the package's Python code (and the pure-Python requirements its tasks import, `PURE_REQUIREMENTS`) into one zip and
adds it to the session's Python path on the workers:

* Spark Connect (Databricks Connect, serverless, a Spark Connect server): ``spark.addArtifacts(zip, pyfile=True)``,
  an artifact of this session alone, uploaded over the session's own connection;
* a classic session: ``spark.sparkContext.addPyFile(zip)``, for every job of the application.

The zip's name carries a digest of its contents, so shipping the same code again uploads nothing new and a changed
package is a new file rather than a conflicting one. A zip can carry Python code only: modules with compiled parts
(pyarrow, numpy, pandas, and this package's msgspec and zstandard) must be installed where the workers run. Every
Databricks runtime has the first three; the others come with ``%pip install mds-streaming`` in a notebook, a cluster
library, or Databricks Connect's UDF dependencies (docs/spark.md). So the call ends by running one small job whose
task imports what a conversion's tasks import: a worker lacking any of it raises `WorkerImportError` naming the
module, here rather than halfway through a conversion.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from streaming.spark.task import CHECK_SCHEMA, check_worker_imports
from streaming.spark.worker_python import worker_import_problem

#: Pure-Python distributions the tasks import that a Spark's workers may lack (a Databricks runtime does).
PURE_REQUIREMENTS = ("catalogue",)
#: Every zip entry gets this time, so the same code gives the same bytes (and name) on every call.
_FIXED_TIME = (2020, 1, 1, 0, 0, 0)
#: Session id -> (the session, the zip it got): the session is kept so that its id names it alone.
_shipped: dict[int, tuple[Any, str]] = {}


def ship_package(spark: Any = None) -> str:
    """Add this package's Python code to the Python path of `spark`'s workers (default: the active session).

    Returns the zip's file name. Raises `WorkerImportError` naming the module when the workers still cannot import
    what a conversion's tasks import (a module with compiled parts, which no zip can carry: install it there).
    """
    session = spark if spark is not None else _active_session()
    folder = _private_folder()
    archive = build_archive(folder)
    name = os.path.basename(archive)
    if _shipped.get(id(session), (None, ""))[1] != name:
        if _is_connect(session):
            session.addArtifacts(archive, pyfile=True)
        else:
            session.sparkContext.addPyFile(archive)
        _shipped[id(session)] = (session, name)
    try:
        session.range(0, 1, 1, 1).mapInArrow(check_worker_imports, CHECK_SCHEMA).collect()
    except Exception as err:
        if (problem := worker_import_problem(err)) is not None:
            raise problem from None
        raise
    return name


def build_archive(folder: str) -> str:
    """Write the zip of this package and `PURE_REQUIREMENTS` into `folder`; its path (named by its contents)."""
    entries: dict[str, Path] = {}
    for module in ("streaming", *PURE_REQUIREMENTS):
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue  # not installed here either: the workers' check names it
        origin = Path(spec.origin)
        if origin.name != "__init__.py":
            entries[origin.name] = origin
            continue
        for path in sorted(origin.parent.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed"):
                entries[path.relative_to(origin.parent.parent).as_posix()] = path
    digest = hashlib.sha256()
    for arcname, path in sorted(entries.items()):
        digest.update(arcname.encode() + b"\0" + path.read_bytes() + b"\0")
    archive = os.path.join(folder, f"mds_streaming-{digest.hexdigest()[:16]}.zip")
    if not os.path.exists(archive):
        partial = archive + ".partial"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as bundle:
            for arcname, path in sorted(entries.items()):
                info = zipfile.ZipInfo(arcname, _FIXED_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                bundle.writestr(info, path.read_bytes())
        os.replace(partial, archive)
    return archive


def _active_session() -> Any:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        raise ValueError("ship_package: no active SparkSession; pass the session, e.g. ship_package(spark).")
    return session


def _is_connect(session: Any) -> bool:
    """Whether `session` is a Spark Connect session (its module is pyspark's Connect client, or Databricks')."""
    return "connect" in type(session).__module__.split(".")


_folder: str | None = None


def _private_folder() -> str:
    """This process's folder for the zip, removed at exit (a classic SparkContext serves the file from there)."""
    global _folder
    if _folder is None:
        _folder = tempfile.mkdtemp(prefix="mds-ship-")
        atexit.register(shutil.rmtree, _folder, True)
    return _folder
