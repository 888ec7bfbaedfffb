"""Stream MDS, JSON and CSV/TSV/XSV shards from Spark, object stores and local disk into PyTorch.

`import streaming` stays cheap: the public names below are resolved on first use, so writing or
reading shards never imports torch, pyspark or a cloud SDK it does not need. The registries are the exception,
as upstream's are: they and their built-in entries exist once `import streaming` returns, so code that saves and
restores `catalogue.REGISTRY` around its own work (llm-foundry's tests do) keeps the ``stream`` entry.
"""

from __future__ import annotations

import importlib
from typing import Any

from streaming._extras import explain_missing
from streaming._version import DISTRIBUTION_VERSION as __mds_version__
from streaming._version import __version__
from streaming.dataset import registry as _registry  # noqa: F401 - registers the built-in stream class now

_EXPORTS = {
    "MDSWriter": "streaming.format",
    "JSONWriter": "streaming.format",
    "XSVWriter": "streaming.format",
    "CSVWriter": "streaming.format",
    "TSVWriter": "streaming.format",
    "LocalDataset": "streaming.dataset.local",
    "Stream": "streaming.dataset.stream",
    "StreamingDataset": "streaming.dataset.dataset",
    "StreamingDataLoader": "streaming.dataset.dataloader",
    "vacuum": "streaming.format.vacuum",
}

__all__ = ["__mds_version__", "__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as err:
        # StreamingDataset and StreamingDataLoader need torch, an extra: say which one rather than "No module named".
        raise (explain_missing(err, name) or err) from err
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
