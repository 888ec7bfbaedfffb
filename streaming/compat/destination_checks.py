"""Checks that a write destination exists before anything is written: its bucket, container, dataset repository
or folder (upstream's uploaders' `check_*_exists`).

A bucket-like destination is probed with one listing of a name that cannot exist below it: the listing is empty
when the bucket exists and fails with ObjectNotFoundError when it does not, on every backend. A failure for any
other reason (credentials, permissions, network) is raised as itself. A missing destination raises
FileNotFoundError whose message begins with upstream's words, followed by what the backend said.
"""

from __future__ import annotations

import uuid

from streaming.storage.errors import ObjectNotFoundError
from streaming.storage.registry import storage_for
from streaming.storage.url import join_url, split_url


def _probe(url: str) -> None:
    """List a name that cannot exist below `url`; ObjectNotFoundError if the bucket (or repository) is missing."""
    probe = join_url(url, f".mds-streaming-probe-{uuid.uuid4().hex}")
    storage_for(probe).list(probe)


def check_bucket_exists(remote: str, kind: str = "bucket") -> None:
    """Raise FileNotFoundError if the bucket (`kind`: or container) holding `remote` does not exist."""
    location = split_url(remote)
    name = location.netloc.partition("@")[0] if location.scheme != "dbfs" else location.key
    try:
        _probe(remote)
    except ObjectNotFoundError as missing:
        raise FileNotFoundError(
            f"Either {kind} `{name}` does not exist! or check the {kind} permission. ({missing})"
        ) from missing


def check_dataset_exists(remote: str) -> None:
    """Raise FileNotFoundError if the Hugging Face dataset repository of the `hf://datasets/...` URL is missing."""
    from streaming.storage.hf import parse_hub_url

    repo_id = parse_hub_url(remote).repo_id
    try:
        _probe(remote)
    except ObjectNotFoundError as missing:
        raise FileNotFoundError(
            f"The HF dataset {repo_id} could not be found. Please make sure that the dataset exists and you have "
            f"the correct access permissions. ({missing})"
        ) from missing


def check_folder_exists(remote: str) -> None:
    """Raise FileNotFoundError if the DBFS folder `dbfs:/...` does not exist (a folder is not an object)."""
    from streaming.storage.databricks import DBFSStorage

    storage = storage_for(remote)
    if not isinstance(storage, DBFSStorage):
        raise ValueError(f"{remote!r} is not a DBFS path (dbfs:/... outside /Volumes)")
    if not storage.folder_exists(remote):
        path = split_url(remote).key
        raise FileNotFoundError(f"Databricks File System path {path} not found ({remote} is not a folder there)")
