"""A reader's share computed as it is read (`streamed_share`, `shift_order`) is the whole plan's, position for
position: against `generate_work` and `get_shuffle_py1e`, which the reference's orders check."""

import os
import warnings

import numpy as np
import pytest

from streaming.dataset import block_order
from streaming.dataset.batching import PlanInputs, generate_work
from streaming.dataset.block_order import py1br_chunks, py1s_chunks
from streaming.dataset.shift_order import equal_keys_in_position_order
from streaming.dataset.shuffle import canonical_spans, get_shuffle, get_shuffle_py1e, stream_py1e
from streaming.dataset.streamed_share import streamed_share
from streaming.dataset.world import World


def plan_of(shard_sizes, batch_size, shuffle=True, block=300, streams=None, ncn=1, algo="py1e"):
    sizes = np.array(shard_sizes, np.int64)
    per_stream = streams or [len(sizes)]
    starts = np.cumsum(per_stream) - per_stream
    totals = [int(sizes[start : start + count].sum()) for start, count in zip(starts, per_stream)]
    return PlanInputs(
        samples_per_shard=sizes,
        shards_per_stream=per_stream,
        choose_per_stream=totals,
        proportion_per_stream=[total / sum(totals) for total in totals],
        epoch_size=sum(totals),
        batch_size=batch_size,
        num_canonical_nodes=ncn,
        shuffle=shuffle,
        shuffle_algo=algo,
        shuffle_seed=17,
        shuffle_block_size=block,
    )


def read_all(share, step):
    parts = [share[start : start + step] for start in range(0, len(share), step)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


STREAMED_ALGOS = ["py1e", "py1s", "py1br"]


@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("batch_size", [1, 4, 7])
@pytest.mark.parametrize("shuffle", [*STREAMED_ALGOS, None])
@pytest.mark.parametrize("sample_in_epoch", [0, 5, 133, 1200])
def test_streamed_share_is_the_plans_run(ranks, workers, batch_size, shuffle, sample_in_epoch):
    rng = np.random.default_rng(ranks * 100 + workers * 10 + batch_size)
    algo = shuffle or "py1e"
    plan = plan_of(rng.integers(1, 90, 40), batch_size, shuffle is not None, streams=[25, 15], algo=algo)
    for worker in range(ranks * workers):
        world = World(1, ranks, workers, worker)
        whole = generate_work("random", plan, world, 3, sample_in_epoch)[0, world.rank_of_node, world.worker_of_rank]
        share = streamed_share(plan, world, 3, sample_in_epoch)
        assert share is not None
        assert len(share) == whole.size
        assert np.array_equal(read_all(share, 37), whole.reshape(-1))


def test_the_repeated_tail_of_an_uneven_split_over_ranks():
    # 203 samples over 4 ranks: the node's positions are padded with 1 position from before the last 3.
    plan = plan_of([100, 103], 8, shuffle=True, block=200)
    for worker in range(4):
        world = World(1, 4, 1, worker)
        whole = generate_work("random", plan, world, 0, 0)[0, worker, 0].reshape(-1)
        share = streamed_share(plan, world, 0, 0)
        assert share is not None
        assert np.array_equal(read_all(share, 5), whole)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"ncn": 2}, "two canonical nodes"),
        ({"algo": "naive"}, "a shuffle of the whole epoch at once"),
        ({"algo": "py2s"}, "a shuffle whose fixed pass covers every sample before the first"),
        ({"block": 40}, "a shard larger than the smallest block (the reference warns first)"),
    ],
)
def test_layouts_it_does_not_compute_are_left_to_the_whole_plan(change, why):
    plan = plan_of([60, 70, 80], 4, **change)
    assert streamed_share(plan, World(1, 1, 1, 0), 0, 0) is None, why


def test_a_stream_without_shards_counts_no_samples():
    plan = plan_of([30, 40, 50], 4, streams=[3, 0])
    world = World(1, 1, 1, 0)
    share = streamed_share(plan, world, 0, 0)
    assert share is not None
    assert np.array_equal(read_all(share, 16), generate_work("random", plan, world, 0, 0).reshape(-1))


def test_a_streamed_share_reads_forward_only():
    share = streamed_share(plan_of([50, 50], 4), World(1, 1, 1, 0), 0, 0)
    assert share is not None
    share[0:10]
    with pytest.raises(IndexError, match="read forward"):
        share[5:20]


@pytest.mark.parametrize("algo", ["py1s", "py1br"])
@pytest.mark.parametrize("seed", range(10))
def test_block_orders_are_the_whole_shuffle_from_any_position(algo, seed):
    """py1s and py1br produced block by block (small chunks, blocks that overlap by up to 3/4 of a block) are
    the whole shuffle's order; resumed at a position, the first chunk starts at or before it."""
    rng = np.random.default_rng(seed + 500)
    sizes = rng.integers(0, 300, int(rng.integers(1, 90)))
    sizes[0] += 1
    block = int(rng.integers(8, 2000))
    whole = get_shuffle(algo, sizes, 1, seed, 4, block)
    for skip_to in sorted({0, 1, len(whole) // 3, len(whole) - 1}):
        begins, piece_sizes, _, epoch_rng = canonical_spans(sizes, 1, seed, 4)
        if algo == "py1s":
            chunks = list(py1s_chunks(epoch_rng, begins, piece_sizes, skip_to))
        else:
            chunks = list(py1br_chunks(epoch_rng, begins, piece_sizes, int(0.75 * block), int(1.25 * block), skip_to))
        first = chunks[0][0]
        assert first <= skip_to
        assert [start for start, _ in chunks] == list(np.cumsum([first] + [len(ids) for _, ids in chunks])[:-1])
        assert np.array_equal(np.concatenate([ids for _, ids in chunks]), whole[first:])


def test_py1s_chunks_cut_between_pieces(monkeypatch):
    monkeypatch.setattr(block_order, "CHUNK_SAMPLES", 100)
    sizes = np.full(12, 70)
    begins, piece_sizes, _, rng = canonical_spans(sizes, 1, 3, 0)
    chunks = list(py1s_chunks(rng, begins, piece_sizes))
    assert [len(ids) for _, ids in chunks] == [140] * 6
    assert np.array_equal(np.concatenate([ids for _, ids in chunks]), get_shuffle("py1s", sizes, 1, 3, 0))


@pytest.mark.parametrize("seed", range(12))
def test_windowed_py1e_is_the_whole_sort(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 400, int(rng.integers(1, 80)))
    sizes[0] += 1
    block = int(rng.integers(20, 3000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some pieces outgrow their block, as the reference warns
        whole = get_shuffle_py1e(sizes, 1, seed, 2, block)
        # Small merges: the window is flushed many times, each time only below the bound a later key can reach.
        streamed = np.concatenate(list(stream_py1e(sizes, seed, 2, block, merge_samples=64)))
    assert np.array_equal(streamed, whole)


@pytest.mark.parametrize("seed", range(12))
def test_windowed_py1e_resumed_at_a_position_is_the_whole_sorts_tail(seed):
    """Resumed deep in the epoch, the pieces wholly before the position are drawn past, not sorted: the order
    from the first chunk on is the whole sort's, and the first chunk starts at or before the position."""
    rng = np.random.default_rng(seed + 100)
    sizes = rng.integers(1, 300, int(rng.integers(20, 120)))
    block = int(rng.integers(20, 2000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = get_shuffle_py1e(sizes, 1, seed, 2, block)
        shared_states = stream_py1e(sizes, seed, 2, block).states
        for skip_to in sorted({0, 1, int(1.25 * block) + 2, len(whole) // 2, len(whole) - 3, len(whole) - 1}):
            for states in (None, shared_states):
                order = stream_py1e(sizes, seed, 2, block, merge_samples=64, states=states)
                chunks = list(order.chunks(skip_to))
                starts = [start for start, _ in chunks]
                first = starts[0] if chunks else len(whole)
                assert first <= skip_to
                assert starts == list(np.cumsum([first] + [len(ids) for _, ids in chunks])[:-1])
                assert np.array_equal(np.concatenate([ids for _, ids in chunks]), whole[first:])
                if skip_to > 3 * block + int(sizes.max()):
                    assert first > 0  # it did skip


def test_readers_sharing_the_shuffles_states_get_the_same_order(tmp_path):
    plan = plan_of(np.full(30, 50), 4, block=400)
    built = []

    def shared_file(key, build):
        path = tmp_path / key
        if not path.exists():
            built.append(key)
            build(str(path))
        return str(path)

    for worker in range(4):
        world = World(1, 2, 2, worker)
        whole = generate_work("random", plan, world, 1, 8)[0, world.rank_of_node, world.worker_of_rank].reshape(-1)
        share = streamed_share(plan, world, 1, 8, shared_file)
        assert share is not None
        assert np.array_equal(read_all(share, 64), whole)
    assert built == ["py1e-states-e1-seed17-b400-g64.npy"]


def test_equal_keys_come_out_in_position_order():
    # A float64 collision of two shifted positions: the unstable sort may put the later position first; the run
    # of equal keys is put back in position order (ids and the sort's permutation alike).
    keys = np.array([0.5, 2.25, 2.25, 2.25, 7.0])
    ids = np.array([10, 13, 11, 12, 14])
    order = np.array([0, 3, 1, 2, 4])  # the unsorted index of each sorted key
    positions = np.array([0, 1, 2, 3, 4])  # position of each unsorted key
    equal_keys_in_position_order(keys, ids, order, positions)
    assert ids.tolist() == [10, 11, 12, 13, 14]
    assert order.tolist() == [0, 1, 2, 3, 4]


def _loader_epoch(local, monkeypatch, small_plan_bytes: int) -> tuple[list[int], list[str]]:
    """A 2-worker DataLoader's epoch (sample ids, in order) and the plan files its workers made."""
    import streaming.dataset.plan_memory as plan_memory
    from streaming import StreamingDataLoader, StreamingDataset

    # Forked workers inherit the threshold.
    monkeypatch.setattr(plan_memory, "SMALL_PLAN_BYTES", small_plan_bytes)
    dataset = StreamingDataset(local=str(local), shuffle=True, shuffle_block_size=500, batch_size=8, shuffle_seed=5)
    ids = []
    files: list[str] = []
    for batch in StreamingDataLoader(dataset, batch_size=8, num_workers=2):
        ids.extend(int(value) for value in batch["id"])
        files = files or sorted(os.listdir(dataset._state.path))
    return ids, files


def test_dataloader_workers_stream_a_plan_larger_than_a_small_one(tmp_path, monkeypatch):
    from streaming import MDSWriter

    with MDSWriter(out=str(tmp_path / "ds"), columns={"id": "int64"}, size_limit=1 << 10) as writer:
        for number in range(3_000):
            writer.write({"id": number})
    built_whole, whole_files = _loader_epoch(tmp_path / "ds", monkeypatch, 1 << 30)
    streamed, streamed_files = _loader_epoch(tmp_path / "ds", monkeypatch, 1 << 10)
    assert [name for name in whole_files if name.startswith("plan-")]
    assert not [name for name in streamed_files if name.startswith("plan-")]
    assert [name for name in streamed_files if name.startswith("py1e-states-")]
    # The same samples in the same order either way; every sample once.
    assert streamed == built_whole and sorted(streamed) == list(range(3_000))


def test_a_share_resumed_deep_in_the_epoch_holds_a_window_not_the_epoch_before_it():
    import tracemalloc

    num_samples = 8_000_000
    plan = plan_of(np.full(80, num_samples // 80), 32, shuffle=False)
    world = World(1, 1, 1, 0)
    resume_at = 6_000_000
    share = streamed_share(plan, world, 0, resume_at)
    assert share is not None
    tracemalloc.start()
    try:
        first = share[0:64]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(first, np.arange(resume_at, resume_at + 64))
    # The order comes in chunks of 2^20 ids (8 MiB): a few of them, not the 6M ids (48 MB) before the position.
    assert peak < 24 << 20, peak
