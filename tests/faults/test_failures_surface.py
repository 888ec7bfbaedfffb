"""The `ShardSink` contract on every remote store: a storage failure at the first, a middle or the last shard,
or at the index, surfaces as the `StorageError` naming that object's URL, and no index names a missing shard.

The failure is real: a proxy in front of the store's server resets every request for the chosen object.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from streaming import MDSWriter
from streaming.format.index import INDEX_BASENAME
from streaming.storage.errors import StorageError
from streaming.storage.registry import storage_for
from tests.remotes import Remote

#: GCS is left out: its client sends the object's name in the body of a multipart upload, in a later packet
#: than the request line, so this proxy cannot single out one object there.
STORES = ["s3", "azure", "oci", "volumes"]
SHARDS = 4
POSITIONS = {"first shard": "shard.00000.mds", "last shard": f"shard.{SHARDS - 1:05}.mds", "index": INDEX_BASENAME}


@pytest.mark.parametrize("scheme", STORES)
def test_a_failed_upload_surfaces_as_the_storage_error_of_that_object(
    scheme: str, remote_factory: Callable[[str], Remote], tmp_path, monkeypatch
) -> None:
    if scheme == "volumes":
        # The Databricks SDK retries a reset connection for its whole retry window, which the package sets to the
        # operation's timeout (60 s): 3 minutes for the 3 positions. The same retry loop, over a 5 s window.
        from streaming.storage.databricks import _DatabricksStorage

        monkeypatch.setattr(
            _DatabricksStorage, "_client", lambda self, timeout=5.0: self._clients.get(min(timeout, 5.0))
        )
    remote = remote_factory(scheme)
    proxy = remote.through_proxy()
    for position, name in POSITIONS.items():
        root = remote.url(position.replace(" ", "-"))
        proxy.refuse(f"{position.replace(' ', '-')}/{name}")
        with pytest.raises(StorageError) as raised:
            with MDSWriter(out=root, columns={"blob": "bytes"}, size_limit=2500, retry=1) as writer:
                for i in range(7):
                    writer.write({"blob": bytes([i]) * 900})
        assert raised.value.url == f"{root}/{name}", f"{position}: {raised.value!r}"
        proxy.refuse(None)
        if position != "index":
            assert not storage_for(root).exists(f"{root}/{INDEX_BASENAME}"), "no index may name a missing shard"
    assert proxy.faults["refused"] >= len(POSITIONS)
