"""Helpers shared by tests: fixture locations and deep comparison of decoded samples."""

from __future__ import annotations

import functools
import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def copy_fixture(name: str, dest: str) -> str:
    """Copy ``tests/fixtures/<name>`` to ``dest`` (tests never modify the fixtures in place)."""
    shutil.copytree(os.path.join(FIXTURES, name), dest)
    return dest


class _FixtureUnpickler(pickle.Unpickler):
    """Reads the fixtures numpy 2 and Pillow 10+ pickled on the older versions the 3.10 lane runs (Databricks Runtime
    14.3's numpy 1.23 and Pillow 9.4): numpy 2's ``numpy._core`` is numpy 1's ``numpy.core``, and an image file's
    state ends with its file name, which Pillow 9 does not expect."""

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("numpy._core") and not hasattr(np, "_core"):
            module = "numpy.core" + module.removeprefix("numpy._core")
        found = super().find_class(module, name)
        if module.startswith("PIL.") and name.endswith("ImageFile") and isinstance(found, type):
            return _image_file_class_for(found)
        return found


@functools.cache
def _image_file_class_for(image_class: type) -> type:
    """``image_class`` itself, or on Pillow 9 a class of the same name that takes Pillow 10's state."""
    import PIL

    if int(PIL.__version__.split(".")[0]) >= 10:
        return image_class

    def __setstate__(self: Any, state: list[Any]) -> None:
        self.filename = state[5] if len(state) > 5 else ""
        image_class.__setstate__(self, state[:5])

    namespace = {"__setstate__": __setstate__, "__module__": image_class.__module__}
    return type(image_class.__name__, (image_class,), namespace)


def load_fixture_pickle(path: str) -> Any:
    """A trusted fixture's pickle (the reference's inputs and decoded samples), on any numpy."""
    with open(path, "rb") as file:
        return _FixtureUnpickler(file).load()


def assert_same_value(got: Any, expected: Any, where: str = "") -> None:
    """The suite's one deep comparison of decoded values: same types, same values, NaN equal to NaN.

    numpy arrays and scalars compare by dtype, shape and bits (so NaN matches NaN and -0.0 differs from 0.0), torch
    tensors (a collated batch) the same way and must be contiguous; images by class name, mode, size and pixels;
    ``Decimal`` by value and scale; dicts by keys in order; lists and tuples item by item; anything else by type and
    ``==`` (float NaN equal to NaN).
    """
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), f"{where}: expected ndarray, got {type(got)}"
        assert got.dtype == expected.dtype and got.shape == expected.shape, f"{where}: {got!r} != {expected!r}"
        if expected.dtype.kind == "O":
            for index, (a, b) in enumerate(zip(got.reshape(-1), expected.reshape(-1))):
                assert_same_value(a, b, f"{where}[{index}]")
        else:
            assert got.tobytes() == expected.tobytes(), f"{where}: {got!r} != {expected!r}"
    elif type(expected).__module__ == "torch" and type(expected).__name__ == "Tensor":
        assert type(got) is type(expected), f"{where}: expected a tensor, got {type(got)}"
        assert got.dtype == expected.dtype and got.shape == expected.shape, f"{where}: {got!r} != {expected!r}"
        assert got.is_contiguous(), f"{where}: not contiguous"
        assert got.numpy().tobytes() == expected.numpy().tobytes(), f"{where}: {got!r} != {expected!r}"
    elif isinstance(expected, np.generic):
        assert type(got) is type(expected), f"{where}: expected {type(expected)}, got {type(got)}"
        assert got.tobytes() == expected.tobytes(), f"{where}: {got!r} != {expected!r}"
    elif type(expected).__module__.startswith("PIL."):
        assert type(got).__name__ == type(expected).__name__, f"{where}: {type(got)} != {type(expected)}"
        assert got.mode == expected.mode and got.size == expected.size, where
        assert got.tobytes() == expected.tobytes(), f"{where}: pixels differ"
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected), f"{where}: keys {list(got)} != {list(expected)}"
        for key in expected:
            assert_same_value(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected), f"{where}: {got!r} != {expected!r}"
        for index, (a, b) in enumerate(zip(got, expected)):
            assert_same_value(a, b, f"{where}[{index}]")
    elif type(expected).__name__ == "Decimal":  # by its text: a signaling NaN cannot even be compared
        assert type(got) is type(expected) and str(got) == str(expected), f"{where}: {got!r} != {expected!r}"
    else:
        both_nan = got != got and expected != expected
        assert type(got) is type(expected) and (got == expected or both_nan), f"{where}: {got!r} != {expected!r}"
        if type(expected).__name__ == "Decimal":
            assert str(got) == str(expected), f"{where}: {got!r} != {expected!r} (scale)"


def one_sample_shard(name: str) -> dict:
    """The index entry of an uncompressed MDS shard ``name`` of one int64 sample (commit-log and bomb tests)."""
    return {
        "column_encodings": ["int64"],
        "column_names": ["id"],
        "column_sizes": [8],
        "compression": None,
        "format": "mds",
        "hashes": [],
        "raw_data": {"basename": name, "bytes": 20, "hashes": {}},
        "samples": 1,
        "size_limit": 1 << 26,
        "version": 2,
        "zip_data": None,
    }


def linked_dataset(root: Path, shards: int, column: str = "n", first: int = 0) -> Path:
    """An MDS dataset at ``root`` of ``shards`` shards of 10 int64 samples ``first`` .. ``first + 9`` of ``column``:
    one real shard hard-linked under every name, so that a large ``index.json`` costs no disk."""
    from streaming import MDSWriter  # here, so that importing the helpers does not import the package

    template = root.parent / f"{root.name}-template"
    with MDSWriter(out=str(template), columns={column: "int64"}) as writer:
        for number in range(10):
            writer.write({column: first + number})
    (entry,) = json.loads((template / "index.json").read_text())["shards"]
    root.mkdir()
    entries = []
    for shard in range(shards):
        name = f"shard.{shard:06d}.mds"
        os.link(template / entry["raw_data"]["basename"], root / name)
        entries.append({**entry, "raw_data": {**entry["raw_data"], "basename": name}})
    (root / "index.json").write_text(json.dumps({"version": 2, "shards": entries}))
    return root


def as_rank(rank: int, world: int) -> Any:
    """Inside the block (``with as_rank(...)``), this process is ``rank`` of ``world`` ranks on one node (the
    launcher's variables), as a training job's rank reads them; the previous values come back afterwards."""
    from unittest import mock

    return mock.patch.dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))


def ids_resumed_on_two_ranks(make: Any, state: dict[str, Any]) -> list[int]:
    """The sample ids two ranks of one node read after each resumes from ``state``, each over its own dataset
    ``make(cache_folder_name)``: with one rank's checkpoint, exactly the rest of that rank's epoch."""
    rest: list[int] = []
    for rank in range(2):
        with as_rank(rank, 2):
            resumed = make(f"resumed-{rank}")
            resumed.load_state_dict(state)
            rest.extend(int(sample["id"]) for sample in resumed)
    return rest


def mixed_with_an_mds_stream(remote: str, tmp_path: Any, batch_size: int = 8) -> Any:
    """A dataset whose epoch of 200 samples mixes ``remote`` half and half with an MDS stream of 100 samples whose
    ids are 10,000 to 10,099 (written under ``tmp_path``)."""
    from streaming import MDSWriter, Stream, StreamingDataset

    with MDSWriter(out=str(tmp_path / "other"), columns={"id": "int64"}) as writer:
        for i in range(100):
            writer.write({"id": 10_000 + i})
    return StreamingDataset(
        streams=[
            Stream(remote=remote, local=str(tmp_path / "m1"), proportion=1),
            Stream(remote=str(tmp_path / "other"), local=str(tmp_path / "m2"), proportion=1),
        ],
        batch_size=batch_size,
        epoch_size=200,
    )
