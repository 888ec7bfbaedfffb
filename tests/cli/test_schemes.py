"""The dataset commands on every other store the package serves (each on its real loopback server)."""

from __future__ import annotations

import pytest

from streaming.storage.dataset_root import DatasetRoot
from tests.cli.conftest import run_cli
from tests.cli.data import write_mds


@pytest.mark.parametrize("scheme", ["gs", "azure", "abfss", "oci", "dbfs", "volumes"])
def test_inspect_verify_rebuild_and_vacuum(scheme, remote_factory):
    root = remote_factory(scheme).url("ds")
    write_mds(root, count=60)
    assert run_cli("inspect", root, "--json", "--samples", "1")[1]["samples"] == 60
    assert run_cli("verify", root)[0] == 0
    location = DatasetRoot(root)
    original = location.read_bytes("index.json")
    location.storage.delete(location.child("index.json"))
    assert run_cli("rebuild-index", root, "--quiet")[0] == 0
    assert location.read_bytes("index.json") == original
    location.write_bytes("orphan/shard.00000.mds", b"x")
    code, doc, _ = run_cli("vacuum", root, "--retention", "1h", "--no-retention-check", "--json")
    assert code == 0 and doc["kept_recent"] == ["orphan/shard.00000.mds"] and doc["deleted"] == []
    code, doc, _ = run_cli("vacuum", root, "--retention", "0", "--no-retention-check", "--json")
    assert code == 0 and doc["deleted"] == ["orphan/shard.00000.mds"]
    assert run_cli("verify", root)[0] == 0
