"""How differential results are compared, and the one list of differences from the reference that are allowed.

Everything not listed in :data:`ALLOWED_DEVIATIONS` must match: written files byte for byte, decoded samples
exactly (see ``operations.canonical``), sample orders element for element, and errors by type (ours may be a
subclass of the reference's, since code that catches the reference's type still catches ours).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from typing import Any

import zstandard

ZSTD_MULTITHREAD_MIN_BYTES = 8 << 20

ALLOWED_DEVIATIONS = {
    "gz-mtime": (
        "docs/differences.md: gz output has mtime 0 so the same shard always has the same bytes and hashes; the "
        "reference embeds the current time. Compared by decompressed content; the compressed file's hashes in "
        "index.json are not compared."
    ),
    "zstd-multithreaded": (
        "docs/differences.md: zstd shards of 8 MiB or more are compressed multi-threaded, a standard frame the "
        "reference decompresses but not its single-threaded bytes. Compared by decompressed content; the "
        "compressed file's size and hashes in index.json are not compared."
    ),
    "empty-dataset-read": (
        "A dataset with no samples (index.json with no shards): the reference's LocalDataset fails to open it "
        "(IndexError from its Spanner over zero shards); ours opens it with length 0. Not a format difference: "
        "both write the same index.json."
    ),
    "ndarray-cut-shape": (
        "A stored ndarray whose shape header is cut off: the reference reads the dimensions it still finds and, when "
        "the values are missing too, returns an empty array of that partial shape; ours raises ValueError "
        "('ndarray shape header ... is cut off'). Found by the generated decoding cases."
    ),
    "empty-epoch-partition": (
        "get_partitions of an epoch of 0 samples: the reference crashes with ZeroDivisionError inside its "
        "arithmetic; ours raises ValueError('Cannot partition an epoch of 0 samples.')."
    ),
    "zero-batch-size": (
        "StreamingDataset(batch_size=0): both build the dataset and fail at the first epoch, the reference with "
        "ZeroDivisionError inside its partition arithmetic, ours with the ValueError it raises for any batch_size "
        "that is not a positive int ('Please pass `batch_size`...')."
    ),
}


# Differences that are genuine bugs of ours (or undecided), known and not fixed yet. Each has a strict-xfail
# regression test in test_regressions.py, which starts failing once it is fixed; the session summary counts how
# many generated cases showed each. key -> (what, a matcher of (ours, reference) results).
OPEN_DIFFERENCES: dict[str, tuple[str, Any]] = {
    "duplicate-hashes-refused": (
        "undecided: hashes=['md5', 'md5'] (sorted, not unique): the reference accepts it, ours raises ValueError "
        "'hashes must be unique and sorted' (the reference's own message says 'must be unique and in sorted "
        "order' but its check is only for order)",
        lambda ours, reference: (
            ours.get("error") == "ValueError"
            and "must be unique and" in ours.get("message", "")
            and reference.get("error") != "ValueError"
        ),
    ),
}
open_differences_seen: Counter[str] = Counter()


def open_difference(ours: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """The known open difference that two differing results show, if any (counted for the session summary)."""
    for key, (_, matches) in OPEN_DIFFERENCES.items():
        if matches(ours, reference):
            open_differences_seen[key] += 1
            return key
    return None


# (function or operation, the reference's error, ours) -> the allowed deviation that explains the pair.
ALLOWED_ERROR_PAIRS = {
    ("partitions", "ZeroDivisionError", "ValueError"): "empty-epoch-partition",
    ("iterate", "ZeroDivisionError", "ValueError"): "zero-batch-size",
}


def _decompressed_deviation(shard: dict[str, Any], kind: str) -> str | None:
    """Which allowed deviation, if any, makes a shard's compressed file differ from the reference's."""
    compression = (shard.get("compression") or "").partition(":")[0]
    if compression == "gz":
        return "gz-mtime"
    raw = shard.get(f"raw_{kind}") or {}
    if compression == "zstd" and raw.get("bytes", 0) >= ZSTD_MULTITHREAD_MIN_BYTES:
        return "zstd-multithreaded"
    return None


def _decompress(name: str, data: bytes) -> bytes:
    if name.endswith(".gz"):
        return gzip.decompress(data)
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def file_differences(ours: dict[str, bytes], reference: dict[str, bytes]) -> tuple[list[str], set[str]]:
    """Differences between two written datasets (basename -> bytes), and the allowed deviations that were used.

    A compressed file under an allowed deviation is compared by its decompressed bytes, and its entry in
    ``index.json`` without its compressed size and hashes; everything else byte for byte.
    """
    differences: list[str] = []
    used: set[str] = set()
    if sorted(ours) != sorted(reference):
        return [f"file names differ: ours {sorted(ours)} vs reference {sorted(reference)}"], used
    if "index.json" not in ours:
        return ["no index.json written"], used
    lenient: dict[str, str] = {}
    ours_index = json.loads(ours["index.json"])
    reference_index = json.loads(reference["index.json"])
    for index in (ours_index, reference_index):
        for shard in index.get("shards", []):
            for kind in ("data", "meta"):
                zipped = shard.get(f"zip_{kind}")
                deviation = _decompressed_deviation(shard, kind) if zipped else None
                if deviation:
                    lenient[zipped["basename"]] = deviation
                    zipped["bytes"] = zipped["hashes"] = "(allowed to differ)"
    if ours_index != reference_index:
        differences.append(f"index.json differs:\n ours      {ours_index}\n reference {reference_index}")
    elif not lenient and ours["index.json"] != reference["index.json"]:
        differences.append("index.json has the same content but different bytes")
    for name in sorted(ours):
        if name == "index.json" or ours[name] == reference[name]:
            continue
        if name in lenient and _decompress(name, ours[name]) == _decompress(name, reference[name]):
            used.add(lenient[name])
            continue
        differences.append(f"{name}: {len(ours[name])} bytes (ours) vs {len(reference[name])} (reference) differ")
    return differences, used


def error_difference(ours: dict[str, Any], reference: dict[str, Any], operation: str = "") -> str | None:
    """``None`` if both failed with compatible types (ours is the reference's type or a subclass, or an allowed
    pair for ``operation``) or neither failed; otherwise what differs."""
    ours_error, reference_error = ours.get("error"), reference.get("error")
    if (operation, reference_error, ours_error) in ALLOWED_ERROR_PAIRS:
        return None
    if ours_error is None and reference_error is None:
        return None
    if ours_error is None:
        return f"the reference raised {reference_error}: {reference['message']!r}; ours did not fail"
    if reference_error is None:
        return f"ours raised {ours_error}: {ours['message']!r}; the reference did not fail"
    if reference_error not in ours["mro"]:
        return (
            f"ours raised {ours_error} (bases {ours['mro'][1:-2]}): {ours['message']!r}; the reference raised "
            f"{reference_error}: {reference['message']!r}"
        )
    return None


def decoding_deviation(ours: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """The allowed deviation that explains two differing ``decode_value`` results, if one does."""
    if "error" not in reference and ours.get("message", "").startswith("ndarray shape header of "):
        return "ndarray-cut-shape"
    return None


def reading_deviation(ours: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """The allowed deviation that explains two differing read results, if one does."""
    if ours.get("samples") == [] and reference.get("error") == "IndexError":
        return "empty-dataset-read"
    return None


def result_difference(ours: dict[str, Any], reference: dict[str, Any], operation: str = "") -> str | None:
    """``None`` if two operation results agree (same values, or compatible errors); otherwise what differs."""
    if "error" in ours or "error" in reference:
        return error_difference(ours, reference, operation)
    if ours != reference:
        return f"results differ:\n ours      {_abridged(ours)}\n reference {_abridged(reference)}"
    return None


def _abridged(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 1500 else text[:1500] + "..."


def lifecycle_difference(ours: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """``None`` if two ``dataset_lifecycle`` results agree step by step: the same steps reached, the same values,
    and a failure at the same step with a compatible type (so the call that fails under the reference fails here,
    and no earlier one)."""
    ours_steps, reference_steps = ours["steps"], reference["steps"]
    for (ours_name, ours_value), (reference_name, reference_value) in zip(ours_steps, reference_steps):
        if ours_name != reference_name:
            return f"ours reached {ours_name!r} where the reference reached {reference_name!r}"
        ours_failed = isinstance(ours_value, dict) and "error" in ours_value
        reference_failed = isinstance(reference_value, dict) and "error" in reference_value
        if ours_failed or reference_failed:
            difference = error_difference(
                ours_value if ours_failed else {}, reference_value if reference_failed else {}, ours_name
            )
        else:
            difference = None if ours_value == reference_value else result_difference(ours_value, reference_value)
        if difference:
            return f"at {ours_name}: {difference}"
    if len(ours_steps) != len(reference_steps):
        return f"ours ran {[name for name, _ in ours_steps]}, the reference {[name for name, _ in reference_steps]}"
    return None
