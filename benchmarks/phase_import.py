"""Phases about an interpreter: versions, which public names exist, and `import streaming` cost.

Stdlib only at module level: `import_streaming` must run before anything else is imported.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time
from importlib import metadata

# Modules worth knowing about after `import streaming` (torch and the cloud SDKs should be absent).
NOTABLE_MODULES = (
    "torch",
    "torchvision",
    "transformers",
    "pyspark",
    "pandas",
    "pyarrow",
    "boto3",
    "botocore",
    "google.cloud",
    "azure",
    "oci",
    "paramiko",
    "matplotlib",
    "fsspec",
    "databricks",
    "huggingface_hub",
    "numpy",
    "PIL",
)
PUBLIC_CLASSES = ("MDSWriter", "LocalDataset", "StreamingDataset")
DISTRIBUTIONS = (
    "streaming-community",
    "mosaicml-streaming",
    "mds-streaming",
    "numpy",
    "torch",
    "pyspark",
    "pillow",
    "zstd",
    "zstandard",
)


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1.0


def _notable() -> str:
    return " ".join(name for name in NOTABLE_MODULES if name in sys.modules) or "none"


def import_streaming(context) -> dict:
    """Wall time of the first `import streaming`, and which notable modules it loaded."""
    before = set(sys.modules)
    start = time.perf_counter()
    import streaming  # noqa: F401

    return {
        "import_s": time.perf_counter() - start,
        "notable_modules": _notable(),
        "modules_loaded": len(set(sys.modules) - before),
        "rss_mb": _rss_mb(),
    }


def import_api(context) -> dict:
    """`import streaming` plus resolving its main public classes (a lazy package pays there)."""
    start = time.perf_counter()
    import streaming

    missing = []
    for name in PUBLIC_CLASSES:
        try:
            getattr(streaming, name)
        except Exception as exc:  # a class the implementation does not have (yet)
            missing.append(f"{name}: {type(exc).__name__}")
    return {
        "import_api_s": time.perf_counter() - start,
        "notable_modules": _notable(),
        "rss_mb": _rss_mb(),
        "missing_classes": missing,
    }


def about(context) -> dict:
    """Interpreter, package location and versions of the packages that matter here."""
    import streaming

    versions = {}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "streaming_version": getattr(streaming, "__version__", "?"),
        "streaming_path": streaming.__file__,
        "distributions": versions,
    }


def probe(context, names: list[str]) -> dict:
    """Is each name there? ('MDSWriter' or 'streaming.base.converters:dataframe_to_mds')"""
    found = {}
    for name in names:
        module_name, _, attribute = name.rpartition(":") if ":" in name else ("streaming", "", name)
        try:
            getattr(importlib.import_module(module_name), attribute)
            found[name] = True
        except Exception as exc:  # missing module, missing attribute or a failing import
            found[name] = f"{type(exc).__name__}: {exc}"[:200]
    return {"found": found}
