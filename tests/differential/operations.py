"""The operations a differential case runs, written once against MosaicML Streaming's public API.

This module runs in two interpreters: in the test process (where ``import streaming`` is this project) and in
the reference worker (where it is streaming-community 0.14.2, see ``reference_worker.py``). It imports only the
standard library and numpy at module level and ``streaming`` inside each operation, so whichever ``streaming`` the
interpreter has is the one exercised. Results are plain, picklable values (see :func:`canonical`) so that the two
sides can be compared with ``==``.

Where the two packages need different calls for the same thing, the branch says why (``IS_REFERENCE``).
"""

from __future__ import annotations

import gc
import os
import shutil
import struct
import tempfile
import warnings
from decimal import Decimal
from functools import cache
from typing import Any

import numpy as np

WRITERS = ("mds", "json", "csv", "tsv", "xsv")


@cache
def is_reference() -> bool:
    """Whether this interpreter's ``streaming`` is the reference (it has no ``streaming.spark``)."""
    import importlib.util

    return importlib.util.find_spec("streaming.spark") is None


def error_result(err: BaseException) -> dict[str, Any]:
    """An exception as data: its type name, the names of its classes (most derived first) and its message."""
    return {
        "error": type(err).__name__,
        "mro": [cls.__name__ for cls in type(err).__mro__],
        "message": str(err)[:300],
    }


def canonical(value: Any) -> Any:
    """A comparable, picklable form of a decoded value that keeps its exact type and bits.

    Floats are kept as their IEEE bytes (so NaN == NaN and -0.0 != 0.0), numpy values with their dtype, images
    as mode, size and pixels.
    """
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("numpy", value.dtype.str, value.tobytes())
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, Decimal):
        return ("decimal", str(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canonical(item) for item in value])
    if isinstance(value, dict):
        return ("dict", sorted((key, canonical(item)) for key, item in value.items()))
    if isinstance(value, (str, bytes, int)) or value is None:
        return value
    if type(value).__module__.startswith("PIL."):
        return ("image", value.mode, value.size, value.tobytes())
    raise TypeError(f"cannot compare a decoded {type(value).__module__}.{type(value).__qualname__}")


def _writer_class(writer: str) -> Any:
    import streaming

    return {
        "mds": streaming.MDSWriter,
        "json": streaming.JSONWriter,
        "csv": streaming.CSVWriter,
        "tsv": streaming.TSVWriter,
        "xsv": streaming.XSVWriter,
    }[writer]


def _folder_files(folder: str) -> dict[str, bytes]:
    files = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            files[name] = f.read()
    return files


def write(
    out: str, writer: str, columns: dict[str, str], samples: list[dict[str, Any]], **writer_kwargs: Any
) -> dict[str, Any]:
    """Write ``samples`` to the new folder ``out``; return ``{"files": {basename: bytes}}`` or the error.

    ``writer_kwargs`` are the writer's own (compression, hashes, size_limit, separator, newline). The writer is
    finished even when a write fails, as ``with`` would, so the error is the first one raised.
    """
    try:
        instance = _writer_class(writer)(out=out, columns=columns, **writer_kwargs)
    except Exception as err:
        return error_result(err)
    failure = None
    try:
        for sample in samples:
            instance.write(sample)
    except Exception as err:
        failure = err
    try:
        instance.finish()
    except Exception as err:
        failure = failure or err
    if failure is not None:
        return error_result(failure)
    return {"files": _folder_files(out)}


def _decompress_in_place(folder: str) -> None:
    """Decompress every compressed shard file next to it, as StreamingDataset does before reading.

    Only the reference needs this: its LocalDataset reads raw files only, whereas ours decompresses on first use.
    """
    import json

    from streaming.base.compression import decompress

    with open(os.path.join(folder, "index.json")) as f:
        shards = json.load(f)["shards"]
    for shard in shards:
        for kind in ("data", "meta"):
            raw, zipped = shard.get(f"raw_{kind}"), shard.get(f"zip_{kind}")
            if raw and zipped:
                with open(os.path.join(folder, zipped["basename"]), "rb") as f:
                    data = decompress(shard["compression"], f.read())
                with open(os.path.join(folder, raw["basename"]), "wb") as f:
                    f.write(data)


def read(folder: str, allow_unsafe_types: bool = True) -> dict[str, Any]:
    """Decode every sample of the dataset in ``folder`` (a private copy is read); ``{"samples": [...]}``."""
    from streaming import LocalDataset

    scratch = tempfile.mkdtemp(prefix="diff-read-")
    try:
        copy = os.path.join(scratch, "ds")
        shutil.copytree(folder, copy)
        try:
            if is_reference():
                _decompress_in_place(copy)
            # Ours refuses `pkl` columns without the opt-in (the reference has no such parameter).
            dataset = (
                LocalDataset(copy) if is_reference() else LocalDataset(copy, allow_unsafe_types=allow_unsafe_types)
            )
            samples = [canonical(dataset[index]) for index in range(len(dataset))]
        except Exception as err:
            return error_result(err)
        return {"samples": samples}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def decode_value(encoding: str, data: bytes) -> dict[str, Any]:
    """``mds_decode(encoding, data)`` at its upstream path: ``{"value": ...}`` or the error."""
    from streaming.base.format.mds.encodings import mds_decode

    try:
        return {"value": canonical(mds_decode(encoding, data))}
    except Exception as err:
        return error_result(err)


def order_function(function: str, args: list[Any]) -> dict[str, Any]:
    """Call ``get_partitions``/``get_shuffle``/``get_sampling`` at their upstream import paths."""
    from streaming.base.partition import get_partitions
    from streaming.base.sampling import get_sampling
    from streaming.base.shuffle import get_shuffle

    call = {"partitions": get_partitions, "shuffle": get_shuffle, "sampling": get_sampling}[function]
    args = list(args)
    if function in ("shuffle", "sampling"):
        position = 1 if function == "shuffle" else 0
        args[position] = np.asarray(args[position], np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = call(*args)
        except Exception as err:
            return error_result(err)
    return {"ids": np.asarray(result).astype(np.int64).tolist(), "shape": list(np.shape(result))}


SHM_RACE_ATTEMPTS = 5


def _new_dataset(dataset_class: Any, stream_class: Any, streams: list[dict[str, Any]], kwargs: dict[str, Any]) -> Any:
    """A dataset over new ``streams``, tried again when the reference loses the race for a /dev/shm prefix.

    Upstream looks for a free prefix and then creates its blocks without O_EXCL retry, so a dataset built by another
    process in between (the core lane runs beside this one) makes it raise FileExistsError on a name like
    ``/000451_locals``. That race is the host's, not the plan's; any other error is the result. Each try builds its
    own `Stream` objects: a dataset's constructor writes its derived weights into them (``choose`` beside
    ``proportion``), which a second dataset would refuse.
    """
    for _ in range(SHM_RACE_ATTEMPTS - 1):
        try:
            return dataset_class(streams=[stream_class(**stream) for stream in streams], **kwargs)
        except FileExistsError as err:
            name = str(err.filename or "")
            if not (is_reference() and name.startswith("/") and name.count("/") == 1):
                raise
            gc.collect()
    return dataset_class(streams=[stream_class(**stream) for stream in streams], **kwargs)


def _on_dataset(streams: list[dict[str, Any]], kwargs: dict[str, Any], use: Any) -> dict[str, Any]:
    """``use(dataset)`` on a new StreamingDataset over ``streams`` (warnings silenced), or the error as data.

    Upstream refuses two live datasets on one local directory, so the dataset is released on the way out (its
    reference cycles are young: a collection of the two younger generations frees it, in milliseconds).
    """
    from streaming import Stream, StreamingDataset

    dataset = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dataset = _new_dataset(StreamingDataset, Stream, streams, kwargs)
            return use(dataset)
        except Exception as err:
            return error_result(err)
        finally:
            del dataset
            if is_reference():
                gc.collect(1)


def epoch_plan(
    streams: list[dict[str, Any]],
    dataset_kwargs: dict[str, Any],
    world: tuple[int, int, int],
    epoch: int,
    sample_in_epoch: int,
) -> dict[str, Any]:
    """The whole epoch plan a StreamingDataset over ``streams`` builds for a simulated ``world``.

    ``streams`` are Stream keyword arguments (``local`` plus a weight); ``world`` is (nodes, ranks per node,
    workers per rank). Returns ``{"work": nested list}`` (nodes, ranks, workers, batches, batch; -1 padding),
    with the epoch size, or the error.
    """
    from streaming.base.batching import generate_work
    from streaming.base.world import World

    simulated = World(*world, 0)

    def plan_of(dataset: Any) -> dict[str, Any]:
        if is_reference():
            # Upstream resolves num_canonical_nodes and shuffle_block_size defaults for the world at the
            # start of an epoch, in _resume; no resumption state exists, so it only fills in defaults.
            dataset._resume(simulated, epoch)
            plan: Any = dataset
        else:
            dataset._parallel_world = simulated
            plan = dataset._plan_inputs()
        work = generate_work(dataset.batching_method, plan, simulated, epoch, sample_in_epoch)
        return {"work": np.asarray(work).tolist()}

    return _on_dataset(streams, dataset_kwargs, plan_of)


def resumed_ids(local: str, dataset_kwargs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The sample ids a StreamingDataset over the dataset at ``local`` yields after loading checkpoint ``state``."""

    def resume(dataset: Any) -> dict[str, Any]:
        dataset.load_state_dict(state)
        return {"ids": [int(sample["id"]) for sample in dataset]}

    return _on_dataset([{"local": local}], dataset_kwargs, resume)


def dataset_lifecycle(
    streams: list[dict[str, Any]], dataset_kwargs: dict[str, Any], state: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Each public step of a StreamingDataset's life, in order, until one fails: construction, ``state_dict``
    before any epoch, ``load_state_dict(state)`` when ``state`` is given, one epoch's sample ids (its ``id``
    column), and ``state_dict`` after it.

    Returns ``{"steps": [(step, result), ...]}``: each result is a value or the error as data (`error_result`), the
    failing step last. Where a package fails (construction or iteration) matters as much as its type: code written
    against the reference builds a dataset with arguments it only checks when it uses them.
    """
    steps: list[tuple[str, Any]] = []

    def walk(dataset: Any) -> dict[str, Any]:
        steps.append(("construct", {"length": len(dataset)}))
        plan: list[tuple[str, Any]] = [("state_dict", lambda: dataset.state_dict(0, False))]
        if state is not None:
            plan.append(("load_state_dict", lambda: dataset.load_state_dict(state)))
        plan.append(("iterate", lambda: [int(sample["id"]) for sample in dataset]))
        plan.append(("state_dict after", lambda: dataset.state_dict(1, False)))
        for name, step in plan:
            try:
                steps.append((name, step()))
            except Exception as err:
                steps.append((name, error_result(err)))
                break
        return {"steps": steps}

    result = _on_dataset(streams, dataset_kwargs, walk)
    if "error" in result:
        steps.append(("construct", result))
    return {"steps": steps}


OPERATIONS = {
    "write": write,
    "read": read,
    "decode_value": decode_value,
    "order_function": order_function,
    "epoch_plan": epoch_plan,
    "resumed_ids": resumed_ids,
    "dataset_lifecycle": dataset_lifecycle,
}
