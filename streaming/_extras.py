"""Optional dependencies: import one on first use, or fail with the command that installs the extra providing it.

The one owner of that install hint: the storage backends, the commands, the Spark converter, the Delta readers and
the dataset zoo all use it. mds-streaming is installed from a checkout or from a wheel (it is not on a package index
yet), so the hint names what this copy was installed from: ``pip install "/path/to/checkout[s3]"`` (``-e`` for an
editable install), ``pip install "/path/to/mds_streaming-<version>-py3-none-any.whl[s3]"``, or, for a copy that came
from an index, ``pip install "mds-streaming[s3]"``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlsplit

#: The extra that installs each optional top-level package a public name, command or store imports when first used.
#: pyarrow and pandas are also in other extras; the one named is the smallest that brings them.
EXTRA_OF_PACKAGE = {
    "torch": "torch",
    "pyarrow": "cli",
    "matplotlib": "cli",
    "pyspark": "spark",
    "pandas": "spark",
    "boto3": "s3",
    "botocore": "s3",
    "google": "gcs",
    "azure": "azure",
    "oci": "oci",
    "databricks": "databricks",
    "huggingface_hub": "hf",
    "paramiko": "sftp",
    "deltalake": "delta",
    "pyroaring": "delta",
    "transformers": "text",
    "torchvision": "vision",
}

#: What a store's extra must have installed before its backend can work (found without importing them).
MODULES_OF_EXTRA = {
    "s3": ("boto3", "botocore"),
    "gcs": ("google.cloud.storage",),
    "azure": ("azure.storage.blob", "azure.identity"),
    "oci": ("oci",),
    "databricks": ("databricks.sdk",),
    "hf": ("huggingface_hub",),
    "sftp": ("paramiko",),
}

DISTRIBUTION = "mds-streaming"


@functools.lru_cache(maxsize=1)
def install_source() -> tuple[str, bool]:
    """What ``pip install`` takes to install this copy again with an extra, and whether it was an editable install.

    The checkout this module is imported from when there is one (an editable install, or the checkout on
    ``PYTHONPATH``), else the local wheel or folder pip recorded installing from (PEP 610's ``direct_url.json``),
    else the distribution's name (a copy installed from a package index).
    """
    checkout = Path(__file__).resolve().parents[1]
    recorded = _recorded_source()
    if _is_our_checkout(checkout):
        editable = recorded is not None and recorded[1] and Path(recorded[0]) == checkout
        return str(checkout), editable
    if recorded is not None and os.path.exists(recorded[0]):
        return recorded
    return DISTRIBUTION, False


def _is_our_checkout(folder: Path) -> bool:
    try:
        text = (folder / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return False
    return f'name = "{DISTRIBUTION}"' in text


def _recorded_source() -> tuple[str, bool] | None:
    """The local path pip installed mds-streaming from, and whether editable; None if none is recorded."""
    try:
        recorded = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    try:
        record = json.loads(recorded or "")
    except ValueError:
        return None
    url = urlsplit(str(record.get("url", "")))
    if url.scheme != "file":
        return None
    return unquote(url.path), bool(record.get("dir_info", {}).get("editable"))


def install_command(extra: str) -> str:
    """The ``pip install`` command that adds ``extra`` to this copy of mds-streaming."""
    source, editable = install_source()
    return f'pip install {"-e " if editable else ""}"{source}[{extra}]"'


def install_hint(extra: str) -> str:
    """The sentence telling how to install an ``mds-streaming`` extra."""
    return f"Install it with: {install_command(extra)}"


def explain_missing(err: ModuleNotFoundError, needed_for: str) -> ModuleNotFoundError | None:
    """The error to raise instead of ``err`` when it is an optional package missing, naming the extra; else None."""
    package = (err.name or "").split(".")[0]
    extra = EXTRA_OF_PACKAGE.get(package)
    if extra is None:
        return None
    return ModuleNotFoundError(
        f"{needed_for} needs {package!r}, which is not installed. {install_hint(extra)}", name=package
    )


def require(module: str, extra: str, needed_for: str) -> ModuleType:
    """Return the imported ``module``.

    Raises:
        ImportError: it is not installed; the message names the ``pip install`` of ``extra``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        missing = isinstance(err, ModuleNotFoundError) and module.startswith((err.name or "?").split(".")[0])
        state = "is not installed" if missing else f"failed to import ({err})"
        raise ImportError(f"{needed_for} needs {module.split('.')[0]!r}, which {state}. {install_hint(extra)}") from err


def check_installed(modules: Sequence[str], extra: str, needed_for: str) -> None:
    """Raise ImportError naming the extra to install if any of ``modules`` is missing (found without importing)."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ImportError(
                f"{needed_for} needs {module!r}, which is not installed. {install_hint(extra)}", name=module
            )


def check_extra(extra: str, needed_for: str) -> None:
    """Raise ImportError naming ``extra`` if a module it must install (`MODULES_OF_EXTRA`) is missing."""
    check_installed(MODULES_OF_EXTRA.get(extra, ()), extra, needed_for)
