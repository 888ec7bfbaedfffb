"""The small token dataset the remote tests write and read back, helpers to inspect where it lives, and a
check that an error shows no credential."""

from __future__ import annotations

import json
import os
import traceback
from typing import Any

import numpy as np

from streaming import MDSWriter
from streaming.storage import storage_for
from streaming.storage.url import join_url, relative_to
from tests.remotes import SECRETS
from tests.services import AZURITE_KEY, DATABRICKS_TOKEN, S3_SECRET

COLUMNS = {"id": "int", "tokens": "ndarray:int32", "name": "str"}
NUM_SAMPLES = 120
SIZE_LIMIT = 2000  # bytes of uncompressed shard: about 25 samples, so 5 shards
BATCH_SIZE = 4
#: What an error about wrong credentials must say (OCI's says the request was not authenticated).
CREDENTIALS_MESSAGE = "(?i)credential|permission|authenticat"


def make_sample(sample_id: int) -> dict[str, Any]:
    """Sample `sample_id`: its values are a function of the id alone, so a reader can check any sample."""
    length = 5 + sample_id % 7
    return {
        "id": sample_id,
        "tokens": (np.arange(length, dtype=np.int32) + sample_id) * 3,
        "name": f"sample-{sample_id:04d}",
    }


def check_sample(sample: dict[str, Any]) -> int:
    """Assert that a decoded sample holds the values `make_sample` gave it; return its id."""
    sample_id = int(sample["id"])
    expected = make_sample(sample_id)
    assert sample["name"] == expected["name"], f"sample {sample_id}: name {sample['name']!r}"
    tokens = np.asarray(sample["tokens"])
    assert tokens.dtype == np.int32 and np.array_equal(tokens, expected["tokens"]), f"sample {sample_id}: tokens"
    return sample_id


def write_dataset(out: str | tuple[str, str], *, first: int = 0, count: int = NUM_SAMPLES, **options: Any) -> None:
    """Write samples `first .. first + count - 1` as zstd MDS shards (sha1-hashed) to `out`."""
    settings: dict[str, Any] = {
        "compression": "zstd",
        "hashes": ["sha1"],
        "size_limit": SIZE_LIMIT,
        "max_workers": 2,
        **options,
    }
    with MDSWriter(out=out, columns=COLUMNS, **settings) as writer:
        for sample_id in range(first, first + count):
            writer.write(make_sample(sample_id))


def remote_names(root: str) -> list[str]:
    """The objects below `root`, relative to it, sorted."""
    return sorted(relative_to(url, root) for url in storage_for(root).list(root))


def read_remote_index(root: str, scratch: str) -> dict[str, Any]:
    """Download and parse `root/index.json` (into `scratch`)."""
    target = os.path.join(scratch, "downloaded-index.json")
    url = join_url(root, "index.json")
    storage_for(url).get(url, target)
    with open(target) as source:
        return json.load(source)


def shard_files(index: dict[str, Any]) -> list[str]:
    """Every file an index names: the compressed (or raw, if uncompressed) data of each shard."""
    names = []
    for shard in index["shards"]:
        info = shard["zip_data"] or shard["raw_data"]
        names.append(info["basename"])
    return names


def delete_remote(root: str) -> None:
    """Delete every object below `root`."""
    storage = storage_for(root)
    for url in storage.list(root):
        storage.delete(url)


def files_below(directory: str) -> dict[str, int]:
    """Relative path -> size of every file below `directory` (files that vanish while listing are skipped)."""
    found = {}
    for parent, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            try:
                found[os.path.relpath(path, directory)] = os.stat(path).st_size
            except FileNotFoundError:
                continue
    return found


def assert_no_secret(error: BaseException) -> None:
    """Assert that neither `error` nor any exception chained to it shows a key, token or private key."""
    shown = "".join(traceback.format_exception(error))
    secrets = {*SECRETS, S3_SECRET, AZURITE_KEY, DATABRICKS_TOKEN, "PRIVATE KEY"}
    leaked = sorted(secret for secret in secrets if secret in shown)
    assert not leaked, f"the error shows secrets {leaked}:\n{shown}"
