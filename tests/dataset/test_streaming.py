"""StreamingDataset behaviour: downloads from a remote directory, cache limits, errors, epochs, resumption."""

from __future__ import annotations

import json
import os

import pytest
from torch.utils.data import DataLoader

from streaming import MDSWriter, Stream, StreamingDataLoader, StreamingDataset

NUM = 400


def _write(path, start=0, count=NUM, compression="zstd", hashes=("sha1",), size_limit=2000):
    with MDSWriter(
        out=path,
        columns={"id": "int", "blob": "bytes"},
        compression=compression,
        hashes=list(hashes),
        size_limit=size_limit,
    ) as w:
        for i in range(start, start + count):
            w.write({"id": i, "blob": bytes([i % 256]) * 40})
    return path


@pytest.fixture
def remote(tmp_path):
    return _write(str(tmp_path / "remote"))


def _ids(samples):
    return [int(s["id"]) for s in samples]


def _disk_bytes(path):
    """Bytes under ``path``; files that background downloads remove meanwhile count as gone."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except FileNotFoundError:
                pass
    return total


def test_cold_then_warm_from_remote_directory(tmp_path, remote):
    local = str(tmp_path / "cache")
    ds = StreamingDataset(remote=remote, local=local, batch_size=8)
    assert len(ds) == NUM and ds.size == NUM
    assert _ids(ds) == list(range(NUM))
    assert not [f for f in os.listdir(local) if f.endswith(".zstd")], "zip kept although keep_zip=False"
    assert _ids(ds) == list(range(NUM))
    assert ds[123]["blob"] == bytes([123]) * 40 and ds[-1]["id"] == NUM - 1


def test_random_access_downloads_on_demand(tmp_path, remote):
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "cache"), batch_size=8)
    assert _ids(ds[[5, 399, 200]]) == [5, 399, 200]
    assert len([f for f in os.listdir(tmp_path / "cache") if f.endswith(".mds")]) == 3


def test_cache_limit_bounds_disk_and_never_loses_samples(tmp_path, remote):
    local = str(tmp_path / "cache")
    shard_bytes = max(
        s["raw_data"]["bytes"] + s["zip_data"]["bytes"]
        for s in json.load(open(os.path.join(remote, "index.json")))["shards"]
    )
    limit = 6 * shard_bytes
    ds = StreamingDataset(remote=remote, local=local, batch_size=8, cache_limit=limit, shuffle=True)
    seen = []
    for sample in ds:
        seen.append(int(sample["id"]))
        assert _disk_bytes(local) <= limit
    assert sorted(seen) == list(range(NUM))
    assert ds.cache_usage <= limit
    assert sorted(_ids(ds)) == list(range(NUM))


def test_cache_limit_too_low_is_refused(tmp_path, remote):
    with pytest.raises(ValueError, match="larger than the index files"):
        StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=8, cache_limit=1000)
    index_bytes = os.path.getsize(os.path.join(remote, "index.json"))
    with pytest.raises(
        ValueError,
        match=r"^Cache limit \(\d+ bytes\) is too low\. Increase the `cache_limit` to at-least four times the largest",
    ):
        StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=8, cache_limit=index_bytes + 10)


def test_local_only_stream_is_never_evicted(tmp_path, remote):
    only = _write(str(tmp_path / "only"), start=NUM, count=100, compression=None)
    before = sorted(os.listdir(only))
    shard_bytes = max(
        s["raw_data"]["bytes"] + (s["zip_data"] or {"bytes": 0})["bytes"]
        for s in json.load(open(os.path.join(remote, "index.json")))["shards"]
    )
    streams = [Stream(remote=remote, local=str(tmp_path / "cache")), Stream(local=only)]
    ds = StreamingDataset(streams=streams, batch_size=4, cache_limit=_disk_bytes(only) + 8 * shard_bytes)
    assert sorted(_ids(ds)) == list(range(NUM + 100))
    assert sorted(os.listdir(only)) == before


def test_missing_remote_shard_names_it(tmp_path, remote):
    os.remove(os.path.join(remote, "shard.00003.mds.zstd"))
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "cache"), batch_size=8, download_retry=1)
    with pytest.raises(Exception, match="shard.00003.mds.zstd"):
        list(ds)


def test_hash_mismatch_is_detected(tmp_path, remote):
    path = os.path.join(remote, "shard.00001.mds.zstd")
    data = bytearray(open(path, "rb").read())
    data[10] ^= 1
    open(path, "wb").write(bytes(data))
    ds = StreamingDataset(
        remote=remote, local=str(tmp_path / "cache"), batch_size=8, validate_hash="sha1", download_retry=1
    )
    with pytest.raises(Exception, match="Checksum failure.*shard.00001.mds.zstd"):
        list(ds)
    assert not os.path.exists(tmp_path / "cache" / "shard.00001.mds.zstd")


def test_two_datasets_in_one_process(tmp_path, remote):
    other = _write(str(tmp_path / "other"), start=1000, count=50)
    train = StreamingDataset(remote=remote, local=str(tmp_path / "a"), batch_size=4, shuffle=True)
    val = StreamingDataset(remote=other, local=str(tmp_path / "b"), batch_size=4)
    train_iter, val_iter = iter(train), iter(val)
    mixed = [next(train_iter)["id"] for _ in range(10)] + [next(val_iter)["id"] for _ in range(10)]
    assert all(i < NUM for i in mixed[:10]) and mixed[10:] == list(range(1000, 1010))


def test_reiterating_after_break_starts_the_next_epoch(tmp_path, remote):
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=4, shuffle=True)
    for i, _ in enumerate(ds):
        if i == 5:
            break
    second = _ids(ds)
    reference = StreamingDataset(remote=remote, local=str(tmp_path / "d"), batch_size=4, shuffle=True)
    reference.load_state_dict({"epoch": 1, "sample_in_epoch": 0, "num_canonical_nodes": 1, "shuffle_seed": 9176})
    assert second == _ids(reference)
    assert ds.state_dict(0, False)["epoch"] == 1


def test_stale_state_warns(tmp_path, remote):
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=4)
    next(iter(ds))
    with pytest.warns(UserWarning, match="stale"):
        ds.load_state_dict({"epoch": 0, "sample_in_epoch": 8, "num_canonical_nodes": 1, "shuffle_seed": 9176})


def test_iteration_needs_batch_size(tmp_path, remote):
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "c"))
    with pytest.raises(ValueError, match="batch_size"):
        next(iter(ds))


def test_argument_validation(tmp_path, remote):
    with pytest.raises(ValueError, match="either `streams` or `remote`/`local`"):
        StreamingDataset(batch_size=1)
    for bad in (
        {"batching_method": "x"},
        {"sampling_method": "x"},
        {"shuffle_seed": -1},
        {"epoch_size": -5},
    ):
        with pytest.raises(ValueError):
            StreamingDataset(remote=remote, local=str(tmp_path / "c"), **bad)


def test_unsafe_types_need_opt_in(tmp_path):
    out = str(tmp_path / "pkl")
    with MDSWriter(out=out, columns={"obj": "pkl"}) as w:
        w.write({"obj": {"a": 1}})
    with pytest.raises(ValueError, match="unsafe type: pkl"):
        StreamingDataset(local=out, batch_size=1)
    assert StreamingDataset(local=out, batch_size=1, allow_unsafe_types=True)[0] == {"obj": {"a": 1}}


def test_uneven_workers_do_not_hang(tmp_path, remote):
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=7)
    loader = DataLoader(ds, batch_size=7, num_workers=3, timeout=60)
    for _ in range(2):
        assert sorted(int(i) for batch in loader for i in batch["id"]) == list(range(NUM))


def test_dataloader_checkpoint_resumes_exactly(tmp_path, remote):
    def make():
        return StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=4, shuffle=True)

    full = [int(i) for batch in StreamingDataLoader(make(), batch_size=4, num_workers=2) for i in batch["id"]]
    loader = StreamingDataLoader(make(), batch_size=4, num_workers=2)
    head = []
    for step, batch in enumerate(loader):
        head.extend(int(i) for i in batch["id"])
        if step == 9:
            state = loader.state_dict()
            break
    assert state["sample_in_epoch"] == 40 and state["epoch"] == 0
    # A dataset no incremental run keeps checkpoints with exactly upstream's keys.
    assert set(state) == {"epoch", "sample_in_epoch", "num_canonical_nodes", "shuffle_seed", "initial_physical_nodes"}
    resumed_loader = StreamingDataLoader(make(), batch_size=4, num_workers=2)
    resumed_loader.load_state_dict(json.loads(json.dumps(state)))
    tail = [int(i) for batch in resumed_loader for i in batch["id"]]
    assert head + tail == full


def test_epoch_size_and_mixing(tmp_path, remote):
    other = _write(str(tmp_path / "other"), start=1000, count=100)
    streams = [
        Stream(remote=remote, local=str(tmp_path / "a"), proportion=3),
        Stream(remote=other, local=str(tmp_path / "b"), proportion=1),
    ]
    ds = StreamingDataset(streams=streams, batch_size=4, epoch_size=200)
    ids = _ids(ds)
    assert len(ids) == 200 and sum(i >= 1000 for i in ids) == 50
    assert [s.choose for s in ds.streams] == [150, 50]


def _worker_strategy(batch):
    import torch.multiprocessing

    return torch.multiprocessing.get_sharing_strategy()


def test_workers_share_batches_by_name_without_touching_the_main_process(tmp_path, remote):
    import torch.multiprocessing

    main_before = torch.multiprocessing.get_sharing_strategy()
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=8)
    loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=_worker_strategy)
    assert set(loader) == {main_before}, "the first iteration must not wait for torch's shared-memory manager"
    assert set(loader) == {"file_system"}
    assert torch.multiprocessing.get_sharing_strategy() == main_before


def test_a_long_first_iteration_shares_by_name_from_each_workers_third_batch(tmp_path, remote, monkeypatch):
    import torch.multiprocessing

    import streaming.dataset.dataset as dataset_module

    main_before = torch.multiprocessing.get_sharing_strategy()
    # Workers are forked: they see the lowered bound, so the small dataset's shares count as long ones.
    monkeypatch.setattr(dataset_module, "NAME_MID_EPOCH", 16)
    ds = StreamingDataset(remote=remote, local=str(tmp_path / "c"), batch_size=4)
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=_worker_strategy)
    strategies = list(loader)
    # Batches alternate between the 2 workers: each worker's first two go by descriptor, the rest by name.
    assert strategies[:4] == [main_before] * 4
    assert set(strategies[4:]) == {"file_system"} and len(strategies) > 4
    assert torch.multiprocessing.get_sharing_strategy() == main_before
