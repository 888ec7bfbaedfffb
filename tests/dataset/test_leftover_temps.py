"""Temp files a killed process left in a cache folder are removed when their shard is next fetched."""

from __future__ import annotations

import os

from streaming import MDSWriter, StreamingDataset


def test_a_killed_fetch_leaves_nothing_once_the_shard_is_fetched_again(tmp_path) -> None:
    remote, local = tmp_path / "remote", tmp_path / "local"
    with MDSWriter(out=str(remote), columns={"id": "int64"}, compression="zstd", size_limit=200) as writer:
        for i in range(60):
            writer.write({"id": i})
    os.makedirs(local)
    shards = sorted(name for name in os.listdir(remote) if name.endswith(".mds.zstd"))
    leftovers = [
        f".{shards[0]}.k3y_x9.part",  # a partial download
        f"{shards[0].removesuffix('.zstd')}.tmp.0123abcd",  # a partial decompression
        f".{shards[-1]}.zz_top.part",
        "unrelated.txt",
    ]
    for name in leftovers:
        (local / name).write_bytes(b"torn")

    dataset = StreamingDataset(remote=str(remote), local=str(local), batch_size=1)
    assert [sample["id"] for sample in dataset] == list(range(60))
    assert sorted(name for name in os.listdir(local) if ".part" in name or ".tmp." in name) == []
    assert (local / "unrelated.txt").read_bytes() == b"torn"
