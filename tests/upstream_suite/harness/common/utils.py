"""Directory fixtures and small dataset helpers imported by the reference's test modules as ``tests.common.utils``."""

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.common.datasets import SequenceDataset, write_mds_dataset


@pytest.fixture
def local_remote_dir(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two fresh directory paths (not created) under the test's temporary folder."""
    yield str(tmp_path / "local"), str(tmp_path / "remote")


@pytest.fixture
def compressed_local_remote_dir(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """Three fresh directory paths (not created): compressed, local and remote."""
    yield str(tmp_path / "compressed"), str(tmp_path / "local"), str(tmp_path / "remote")


def get_config_in_bytes(
    format: str,
    size_limit: int,
    column_names: list[str],
    column_encodings: list[str],
    column_sizes: list[Any],
    compression: str | None = None,
    hashes: list[str] | None = None,
) -> bytes:
    """The JSON header an MDS shard embeds for these writer settings (sorted keys, UTF-8)."""
    header = {
        "version": 2,
        "format": format,
        "compression": compression,
        "hashes": list(hashes or []),
        "size_limit": size_limit,
        "column_names": column_names,
        "column_encodings": column_encodings,
        "column_sizes": column_sizes,
    }
    return json.dumps(header, sort_keys=True).encode("utf-8")


def convert_to_mds(
    out_root: str,
    dataset_name: str,
    num_samples: int = 117,
    compression: str | None = None,
    hashes: list[str] | None = None,
    size_limit: int = 1 << 8,
    offset: int = 0,
) -> None:
    """Write a synthetic dataset as MDS shards under ``out_root``.

    Only ``sequencedataset`` exists: ids ``000000, 000001, ...`` and ``sample`` values ``3 * i + offset``, so two
    streams written with different offsets can be told apart by value.
    """
    if dataset_name != "sequencedataset":
        raise ValueError(f'Unknown synthetic dataset {dataset_name!r}; only "sequencedataset" exists')
    dataset = SequenceDataset(num_samples, offset=offset)
    columns = dict(zip(dataset.column_names, dataset.column_encodings))
    write_mds_dataset(out_root, columns, dataset, size_limit, compression=compression, hashes=hashes)


def copy_all_files(source: str, destination: str) -> None:
    """Copy the plain files directly inside ``source`` into ``destination`` (created when missing)."""
    target = Path(destination)
    target.mkdir(exist_ok=True)
    for entry in Path(source).iterdir():
        if entry.is_file():
            shutil.copy2(entry, target / entry.name)
