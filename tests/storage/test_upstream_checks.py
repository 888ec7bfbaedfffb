"""Upstream's storage names (streaming-community 0.14.2) exist with upstream's parameters, and the uploaders'
`check_*_exists` tell an existing bucket, container, repository or folder from a missing one on the real servers."""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

import pytest

from streaming.base.storage import upload
from streaming.storage import storage_for

pytestmark = pytest.mark.services

SPEC = json.loads((Path(__file__).parent / "fixtures" / "upstream_storage_api.json").read_text())["modules"]


def _parameters(function) -> list[str]:
    return [
        name if parameter.default is inspect.Parameter.empty else f"{name}={parameter.default!r}"
        for name, parameter in inspect.signature(function).parameters.items()
    ]


EXPECTED = [(module_name, name, info) for module_name, names in SPEC.items() for name, info in names.items()]


@pytest.mark.parametrize(("module_name", "name", "info"), EXPECTED, ids=[f"{m}.{n}" for m, n, _ in EXPECTED])
def test_upstream_name_exists_with_its_parameters(module_name, name, info):
    found = getattr(importlib.import_module(module_name), name)
    if info["kind"] != "class":
        return
    assert [base.__name__ for base in found.__bases__] == info["bases"] or info["bases"] == ["ABC"], found.__bases__
    if info.get("init") is not None:
        assert _parameters(found.__init__)[: len(info["init"])] == info["init"]
    for member, expected in (info.get("members") or {}).items():
        value = inspect.getattr_static(found, member)
        if not isinstance(expected, list):  # an enum member
            assert type(getattr(found, member)).__name__ == expected
            continue
        # upstream's reference lists a classmethod's parameters as bound (no `cls`), others as defined
        function = getattr(found, member) if isinstance(value, classmethod) else inspect.unwrap(value)
        assert _parameters(function) == expected, f"{name}.{member}"


# uploader class, check method, a URL whose bucket (container, repository) does not exist, its name
MISSING = {
    "s3": (upload.S3Uploader, "check_bucket_exists", "s3://no-such-bucket-0/x", "bucket `no-such-bucket-0`"),
    "gs": (upload.GCSUploader, "check_bucket_exists", "gs://no-such-bucket-0/x", "bucket `no-such-bucket-0`"),
    "azure": (upload.AzureUploader, "check_bucket_exists", "azure://no-such-bucket-0/x", "bucket `no-such-bucket-0`"),
    "azure-dl": (
        upload.AzureDataLakeUploader,
        "check_container_exists",
        "azure-dl://no-such-container-0/x",
        "container `no-such-container-0`",
    ),
    "oci": (upload.OCIUploader, "check_bucket_exists", "oci://no-such-bucket-0@testns/x", "bucket `no-such-bucket-0`"),
}


@pytest.mark.parametrize("scheme", sorted(MISSING))
def test_check_bucket_exists(scheme, remote_factory, tmp_path):
    remote = remote_factory(scheme)
    uploader_class, method, missing, named = MISSING[scheme]
    uploader = uploader_class((str(tmp_path / "local"), remote.root))
    getattr(uploader, method)(remote.root)  # the test bucket exists: no error
    with pytest.raises(FileNotFoundError, match=f"^Either {named} does not exist!") as raised:
        getattr(uploader, method)(missing)
    assert missing.split("/x")[0] in str(raised.value)


def test_check_folder_exists_on_dbfs(remote_factory, tmp_path):
    dbfs = remote_factory("dbfs")
    source = tmp_path / "x.bin"
    source.write_bytes(b"x")
    storage_for(dbfs.root).put(str(source), dbfs.url("x.bin"))
    upload.DBFSUploader((str(tmp_path / "a"), dbfs.root)).check_folder_exists()
    missing = dbfs.url("no-such-folder")
    with pytest.raises(FileNotFoundError, match="^Databricks File System path .*no-such-folder not found"):
        upload.DBFSUploader((str(tmp_path / "b"), missing)).check_folder_exists()
    with pytest.raises(FileNotFoundError, match="not found"):  # an object is not a folder
        upload.DBFSUploader((str(tmp_path / "c"), dbfs.url("x.bin"))).check_folder_exists()
