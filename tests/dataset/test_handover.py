"""StreamingDataLoader's worker-made batches (`streaming.dataset.handover`) against torch's own DataLoader.

Each comparison runs the same dataset through ``torch.utils.data.DataLoader`` (torch collates per batch) and
through ``StreamingDataLoader`` (batches made in the workers, handed over through a ring of shared memory):
values, dtypes, batch order, resumption, held batches, ``pin_memory`` and a user's ``collate_fn`` must agree.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from streaming import MDSWriter, StreamingDataLoader, StreamingDataset
from streaming.dataset.handover import Ring, RingBatch, WorkerMessage, in_batch_order

NUM = 203


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("handover") / "ds")
    columns = {"x": "ndarray:float32", "id": "int", "name": "str", "half": "float64", "raw": "bytes"}
    with MDSWriter(out=path, columns=columns, size_limit=3000) as writer:
        for i in range(NUM):
            writer.write(
                {
                    "x": np.arange(i, i + 6, dtype=np.float32),
                    "id": i,
                    "name": f"n{i}",
                    "half": i / 2,
                    "raw": bytes([i % 256]) * 3,
                }
            )
    return path


def _dataset(local, batch_size, **kwargs):
    return StreamingDataset(local=local, batch_size=batch_size, shuffle=True, shuffle_seed=11, **kwargs)


def _plain(batch):
    """A batch as comparable Python values, with each tensor's dtype."""
    return {
        key: (str(value.dtype), value.tolist()) if isinstance(value, torch.Tensor) else value
        for key, value in batch.items()
    }


@pytest.mark.parametrize(("workers", "batch_size", "drop_last"), [(2, 8, False), (3, 5, True)])
def test_same_batches_in_the_same_order_as_torch(local, workers, batch_size, drop_last):
    expected = [
        _plain(b)
        for b in DataLoader(
            _dataset(local, batch_size), batch_size=batch_size, num_workers=workers, drop_last=drop_last
        )
    ]
    loader = StreamingDataLoader(
        _dataset(local, batch_size), batch_size=batch_size, num_workers=workers, drop_last=drop_last
    )
    got = []
    for batch in loader:
        assert not batch["x"].is_shared(), "batch came through torch's per-batch hand-over, not the ring"
        got.append(_plain(batch))
    assert got == expected
    assert loader.num_samples_yielded == sum(len(b["id"][1]) for b in expected)


def test_held_batches_keep_their_values(local):
    """A caller that keeps every batch holds all ring slots: later batches take torch's way, none is overwritten."""
    expected = [_plain(b) for b in DataLoader(_dataset(local, 2), batch_size=2, num_workers=2)]
    held = list(StreamingDataLoader(_dataset(local, 2), batch_size=2, num_workers=2))
    assert [_plain(b) for b in held] == expected
    from_ring = sum(not b["x"].is_shared() for b in held)
    assert 0 < from_ring < len(held), "expected ring batches first, then torch's way once the rings were full"


def _epochs_with_a_break(loader):
    """Epoch ids, an epoch broken off after 8 batches with its checkpoint, then the next epoch's ids."""
    first = [int(i) for batch in loader for i in batch["id"]]
    broken = []
    for step, batch in enumerate(loader):
        broken.extend(int(i) for i in batch["id"])
        if step == 7:
            state = loader.state_dict()
            break
    return first, broken, state, [int(i) for batch in loader for i in batch["id"]]


def test_persistent_workers_break_and_checkpoint_as_torch(local):
    """A broken-off epoch gives every ring slot back; checkpoints count the same samples as torch's loader."""

    class TorchCounting(StreamingDataLoader):
        def _batches_from_workers(self):
            return None

    ours = _epochs_with_a_break(
        StreamingDataLoader(_dataset(local, 4), batch_size=4, num_workers=2, persistent_workers=True)
    )
    torchs = _epochs_with_a_break(
        TorchCounting(_dataset(local, 4), batch_size=4, num_workers=2, persistent_workers=True)
    )
    assert ours == torchs
    assert ours[2]["epoch"] == 1 and ours[2]["sample_in_epoch"] == 32


def test_pin_memory_and_a_users_collate_fn(local):
    def collate(samples):
        return {"ids": torch.tensor([int(s["id"]) for s in samples]), "names": [s["name"] for s in samples]}

    with warnings.catch_warnings():
        # Without an accelerator torch turns pin_memory off with a warning; the batches must still be right.
        warnings.simplefilter("ignore", UserWarning)
        expected = [
            (b["ids"].tolist(), b["names"])
            for b in DataLoader(_dataset(local, 6), batch_size=6, num_workers=2, collate_fn=collate, pin_memory=True)
        ]
        loader = StreamingDataLoader(
            _dataset(local, 6), batch_size=6, num_workers=2, collate_fn=collate, pin_memory=True
        )
        got = [(b["ids"].tolist(), b["names"]) for b in loader]
        pinned = StreamingDataLoader(_dataset(local, 6), batch_size=6, num_workers=2, pin_memory=True)
        batches = list(pinned)
    assert got == expected
    assert sorted(int(i) for b in batches for i in b["id"]) == list(range(NUM))
    if torch.accelerator.is_available():
        assert all(b["x"].is_pinned() for b in batches)


def test_opt_out_uses_torchs_hand_over(local, monkeypatch):
    monkeypatch.setenv("STREAMING_LOADER_HANDOVER", "torch")
    batches = list(StreamingDataLoader(_dataset(local, 8), batch_size=8, num_workers=2))
    assert all(b["x"].is_shared() for b in batches)


def test_in_batch_order_restores_torchs_round_robin():
    # Worker 0 has 1 + 4 + 2 batches, worker 1 has 1 + 4 + 4 + 1, worker 2 has 1: torch yields batch i of every
    # live worker, worker after worker.
    sizes = {0: [1, 4, 2], 1: [1, 4, 4, 1], 2: [1]}
    messages, position = [], {w: 0 for w in sizes}
    for m in range(4):
        for worker, groups in sizes.items():
            if m < len(groups):
                labels = [(worker, position[worker] + k) for k in range(groups[m])]
                position[worker] += groups[m]
                messages.append(WorkerMessage(worker, labels))
    expected = []
    for i in range(max(position.values())):
        expected.extend((w, i) for w in sizes if i < position[w])
    assert list(in_batch_order(iter(messages), True)) == expected
    assert sorted(in_batch_order(iter(messages), False)) == sorted(expected)


def test_a_ring_batch_is_materialized_only_in_the_main_process():
    ring = Ring(64, 2)
    batch = RingBatch(ring, ring.claim(), ring.start(0), [(("x",), "<i4", (16,), 0)], {}, ["x"])
    with pytest.raises(RuntimeError, match="main process"):
        batch.materialize()


def test_large_batches_travel_fewer_to_a_message(tmp_path):
    """300 KB samples in batches of 4: 3 batches per message (MESSAGE_BYTES 4 MiB), same order as torch's."""
    path = str(tmp_path / "large")
    with MDSWriter(out=path, columns={"x": "ndarray:uint8", "id": "int"}, size_limit=1 << 20) as writer:
        for i in range(40):
            writer.write({"x": np.full(300_000, i % 251, np.uint8), "id": i})
    expected = [_plain(b) for b in DataLoader(_dataset(path, 4), batch_size=4, num_workers=2)]
    loader = StreamingDataLoader(_dataset(path, 4), batch_size=4, num_workers=2)
    got = [_plain(b) for b in loader]
    assert loader._worker_batches is not None and loader._worker_batches.dataset.batches_per_message == 3
    assert got == expected
