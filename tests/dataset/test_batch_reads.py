"""Batch reads (`StreamingDataset.get_batch`, `iter_batches`, `StreamingDataLoader`'s columnar path) against the
per-sample path, over generated schemas, values, shard layouts, topologies, shuffles and resumption.

The oracle is the per-sample path itself and torch's ``default_collate``: for any batch, the columns read at once,
collated (`collate_columns`), must be exactly what ``default_collate`` makes of the samples read one by one (same
keys in the same order, tensors of the same dtype, shape and bytes, lists of the same values, or the same error),
and a `StreamingDataLoader` must yield the same batches, counts and ``state_dict`` with batch reads on or off
(``STREAMING_BATCH_READS=0``).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from torch.utils.data import default_collate

from streaming import MDSWriter, StreamingDataLoader, StreamingDataset
from streaming.dataset.handover import collate_columns
from streaming.format.mds.gather import Segment
from streaming.format.mds.nulls import mask_name
from tests.differential.strategies import NDARRAY_DTYPES, mds_values
from tests.helpers import assert_same_value

PLAIN = [*NDARRAY_DTYPES, "int", "str", "bytes", "json", "str_int", "str_float", "str_decimal"]
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------- what is compared


def collated(make: Any) -> tuple[str, Any]:
    """``("ok", value)`` or ``("error", (type, message))`` of ``make()``."""
    try:
        return "ok", make()
    except Exception as err:
        return "error", (type(err), str(err))


def assert_same_batch(columns: dict[str, Any], samples: list[dict[str, Any]]) -> None:
    """The columns of a batch read, collated, are what default_collate makes of the samples (or fail alike)."""
    assert list(columns) == list(samples[0])
    for key, column in columns.items():
        assert len(column) == len(samples), key
        if isinstance(column, list):
            assert_same_value(column, [sample[key] for sample in samples], key)
    got = collated(lambda: collate_columns(columns))
    expected = collated(lambda: default_collate(samples))
    assert got[0] == expected[0], (got, expected)
    if got[0] == "error":
        assert got[1] == expected[1]
    else:
        assert_same_value(got[1], expected[1], "batch")


# ---------------------------------------------------------------------------------------------- generated datasets


@st.composite
def array_columns(draw: st.DrawFn) -> tuple[str, st.SearchStrategy[np.ndarray]]:
    """An ndarray encoding and its values: one dtype and shape for all samples (stacked), or varying ones."""
    dtype = draw(st.sampled_from(NDARRAY_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    kind = draw(st.sampled_from(["ndarray", "typed", "fixed"]))
    if kind == "fixed":
        return f"ndarray:{dtype}:{','.join(map(str, shape))}", hnp.arrays(dtype, shape)
    encoding = "ndarray" if kind == "ndarray" else f"ndarray:{dtype}"
    if draw(st.booleans()):  # every sample alike: the column is stacked
        return encoding, hnp.arrays(dtype, shape)
    dtypes = st.sampled_from(NDARRAY_DTYPES) if kind == "ndarray" else st.just(dtype)
    shapes = hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=3)
    return encoding, st.tuples(dtypes, shapes).flatmap(lambda pair: hnp.arrays(pair[0], pair[1]))


@st.composite
def datasets(draw: st.DrawFn, max_samples: int = 40) -> dict[str, Any]:
    """Columns (some with NULL masks), samples valid for them, and a shard size limit that splits them."""
    names = draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=5, unique=True))
    columns: dict[str, str] = {}
    values: dict[str, st.SearchStrategy[Any]] = {}
    for name in names:
        if draw(st.integers(0, 3)) == 0:
            encoding, strategy = draw(array_columns())
        else:
            encoding = draw(st.sampled_from(PLAIN))
            strategy = mds_values(encoding)
        columns[name], values[name] = encoding, strategy
        if encoding != "json" and draw(st.integers(0, 4)) == 0:
            columns[mask_name(name)], values[mask_name(name)] = "uint8", st.sampled_from([0, 0, 1])
    count = draw(st.integers(1, max_samples))
    samples = draw(st.lists(st.fixed_dictionaries(values), min_size=count, max_size=count))
    size_limit = draw(st.sampled_from([None, 300, 1000, 4000]))
    return {"columns": columns, "samples": samples, "size_limit": size_limit}


def write(path: str, case: dict[str, Any]) -> str:
    with MDSWriter(out=path, columns=case["columns"], size_limit=case["size_limit"]) as writer:
        for sample in case["samples"]:
            writer.write(sample)
    return path


def fresh(tmp_path_factory: Any, case: dict[str, Any]) -> str:
    return write(str(tmp_path_factory.mktemp("batch") / "ds"), case)


# ---------------------------------------------------------------------------------------------- reads


@SETTINGS
@given(case=datasets(), data=st.data())
def test_get_batch_is_default_collate_of_the_samples(tmp_path_factory, case, data):
    local = fresh(tmp_path_factory, case)
    dataset = StreamingDataset(local=local, batch_size=4)
    count = len(case["samples"])
    for _ in range(3):
        ids = data.draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=24))
        assert_same_batch(dataset.get_batch(ids), [dataset[i] for i in ids])


@SETTINGS
@given(case=datasets(), batch_size=st.integers(1, 9), drop_last=st.booleans(), shuffle=st.booleans())
def test_iter_batches_are_the_iteration_in_batches(tmp_path_factory, case, batch_size, drop_last, shuffle):
    local = fresh(tmp_path_factory, case)
    samples = list(StreamingDataset(local=local, batch_size=batch_size, shuffle=shuffle, shuffle_seed=3))
    batches = list(
        StreamingDataset(local=local, batch_size=batch_size, shuffle=shuffle, shuffle_seed=3).iter_batches(
            drop_last=drop_last
        )
    )
    cuts = range(0, len(samples), batch_size)
    expected = [samples[start : start + batch_size] for start in cuts]
    if drop_last and expected and len(expected[-1]) < batch_size:
        expected.pop()
    assert len(batches) == len(expected)
    for columns, chunk in zip(batches, expected):
        assert_same_batch(columns, chunk)


def read_out_batch(
    dataset: StreamingDataset, ids: np.ndarray, read_out: list[bool], start: int, stop: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rows ``start..stop`` of the batch ``ids`` from the shards' bytes, and from the shards whose ``read_out`` is
    True with their columns read out once (`ShardGather.columnar`, as a Delta table's decoded row groups are)."""
    views = [dataset.readers[shard].batch_view() for shard in range(dataset.num_shards)]
    gather = views[0][0]
    assert all(other is gather for other, _ in views)
    firsts = dataset.sample_offset_per_shard
    shards = np.searchsorted(firsts, ids, "right") - 1

    def segments(columnar: list[bool]) -> list[Segment]:
        found = []
        for shard in np.unique(shards).tolist():
            positions = np.flatnonzero(shards == shard)
            view = gather.columnar(views[shard][1]) if columnar[shard] else views[shard][1]
            whole = len(positions) == len(ids)  # the whole batch, in order: no positions needed
            found.append(Segment(view, ids[positions] - firsts[shard], None if whole else positions))
        return found

    expected = gather.prepare(segments([False] * len(views)), len(ids)).columns(start, stop)
    return gather.prepare(segments(read_out), len(ids)).columns(start, stop), expected


@SETTINGS
@given(case=datasets(), data=st.data())
def test_columns_read_out_give_the_same_batches(tmp_path_factory, case, data):
    """From all, some or none of the shards read out, any rows of a batch: the same columns as from the bytes."""
    dataset = StreamingDataset(local=fresh(tmp_path_factory, case), batch_size=4)
    ids = np.array(data.draw(st.lists(st.integers(0, len(case["samples"]) - 1), min_size=1, max_size=24)))
    read_out = data.draw(st.lists(st.booleans(), min_size=dataset.num_shards, max_size=dataset.num_shards))
    start = data.draw(st.integers(0, len(ids) - 1))
    stop = data.draw(st.integers(start + 1, len(ids)))
    got, expected = read_out_batch(dataset, ids, read_out, start, stop)
    assert_same_value(got, expected, "batch")


def test_columns_read_out_across_shards(tmp_path):
    """Every kind of column over several shards, NULLs in the batch, rows repeated and out of order."""
    columns = {
        "s": "str",
        "s__is_null": "uint8",
        "b": "bytes",
        "n": "int",
        "v": "ndarray:float32",
        "r": "ndarray",
        "j": "json",
        "f": "float64",
    }
    samples = [
        {
            "s": f"text {k}",
            "s__is_null": int(k % 7 == 3),
            "b": bytes([k]) * (k % 4),
            "n": k * 1000,
            "v": np.array([k, -k], np.float32),
            "r": np.arange(k % 3 + 1),
            "j": {"k": k},
            "f": k / 3,
        }
        for k in range(48)
    ]
    dataset = StreamingDataset(
        local=write(str(tmp_path / "ds"), {"columns": columns, "samples": samples, "size_limit": 800}), batch_size=4
    )
    assert dataset.num_shards > 3
    gather, view = dataset.readers[0].batch_view()
    # Stacked columns and the str and bytes ones are read out; an ndarray of varying shapes and JSON are not.
    assert sorted(gather.columnar(view).columns or {}) == ["b", "f", "n", "s", "s__is_null", "v"]
    ids = np.array([40, 3, 17, 3, 29, 0, 47, 8, 10])
    for read_out in ([True] * dataset.num_shards, [shard % 2 == 0 for shard in range(dataset.num_shards)]):
        for start, stop in ((0, len(ids)), (2, 7), (1, 2)):
            got, expected = read_out_batch(dataset, ids, read_out, start, stop)
            assert_same_value(got, expected, f"rows {start}..{stop}")
    full, _ = read_out_batch(dataset, ids, [True] * dataset.num_shards, 0, len(ids))
    assert full["s"] == [None if k % 7 == 3 else f"text {k}" for k in ids.tolist()]
    assert full["v"][:, 0].tolist() == ids.tolist()


def test_a_batch_across_shards_in_any_order(tmp_path):
    """Fixed-size records from several shards, repeated and out of order: one take per shard, then batch order."""
    columns = {f"f{i}": "float32" for i in range(5)} | {"label": "int64", "m": "ndarray:int16:2"}
    case = {
        "columns": columns,
        "samples": [
            {**{f"f{i}": np.float32(k * 10 + i) for i in range(5)}, "label": np.int64(k), "m": np.array([k, -k], "<i2")}
            for k in range(50)
        ],
        "size_limit": 300,
    }
    dataset = StreamingDataset(local=write(str(tmp_path / "ds"), case), batch_size=4)
    assert dataset.num_shards > 3
    ids = [49, 0, 17, 17, 3, 48, 25, 1]
    batch = dataset.get_batch(ids)
    assert batch["label"].tolist() == ids
    assert batch["f3"].tolist() == [k * 10 + 3 for k in ids]
    assert_same_batch(batch, [dataset[i] for i in ids])


def test_nulls_fold_as_in_a_per_sample_read(tmp_path):
    case = {
        "columns": {"x": "float32", "x__is_null": "uint8", "s": "str", "s__is_null": "uint8"},
        "samples": [
            {"x": np.float32(i), "x__is_null": int(i % 3 == 0), "s": str(i), "s__is_null": int(i == 4)}
            for i in range(8)
        ],
        "size_limit": None,
    }
    dataset = StreamingDataset(local=write(str(tmp_path / "ds"), case), batch_size=4)
    assert dataset.get_batch([1, 2])["x"].tolist() == [1.0, 2.0]  # no NULL in this batch: stacked
    batch = dataset.get_batch([0, 1, 4])
    assert list(batch) == ["s", "x"]  # the writer orders columns by name
    assert batch["x"] == [None, np.float32(1), np.float32(4)]
    assert batch["s"] == ["0", "1", None]
    assert_same_batch(batch, [dataset[i] for i in (0, 1, 4)])


def test_a_corrupt_sample_fails_as_its_per_sample_read_does(tmp_path):
    case = {"columns": {"t": "str", "n": "int32"}, "samples": [{"t": "ok", "n": np.int32(i)} for i in range(6)]}
    local = write(str(tmp_path / "ds"), {**case, "size_limit": None})
    shard = os.path.join(local, "shard.00000.mds")
    data = bytearray(open(shard, "rb").read())
    data[data.rindex(b"ok")] = 0xFF  # the last sample's text is no longer UTF-8
    with open(shard, "wb") as out:
        out.write(data)
    dataset = StreamingDataset(local=local, batch_size=3)
    with pytest.raises(Exception) as per_sample:
        dataset[5]
    with pytest.raises(type(per_sample.value)) as batch:
        dataset.get_batch([1, 5, 2])
    assert str(batch.value) == str(per_sample.value)
    assert "sample 5" in str(batch.value)


def test_out_of_range_ids_are_refused(tmp_path):
    case = {"columns": {"n": "int"}, "samples": [{"n": i} for i in range(3)], "size_limit": None}
    dataset = StreamingDataset(local=write(str(tmp_path / "ds"), case), batch_size=2)
    with pytest.raises(IndexError, match="Sample 3 is out of range"):
        dataset.get_batch([0, 3])
    assert dataset.get_batch([]) == {}


# ---------------------------------------------------------------------------------------------- the loader

TOPOLOGIES = [
    {},
    {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"},
    {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"},
]


def run_loader(local: str, columnar: bool, options: dict[str, Any], stop_after: int | None = None, state=None):
    """The batches of one epoch (from ``state`` when given), the samples counted, and the state after
    ``stop_after`` batches."""
    os.environ["STREAMING_BATCH_READS"] = "1" if columnar else "0"
    try:
        dataset = StreamingDataset(
            local=local,
            batch_size=options["batch_size"],
            shuffle=options["shuffle"],
            shuffle_algo=options["shuffle_algo"],
            shuffle_seed=5,
            num_canonical_nodes=2,
        )
        loader = StreamingDataLoader(
            dataset,
            batch_size=options["batch_size"],
            num_workers=options["workers"],
            drop_last=options["drop_last"],
        )
        assert loader._reads_columns() is columnar
        if state is not None:
            loader.load_state_dict(state)
        batches, saved = [], None
        for batch in loader:
            batches.append(batch)
            if stop_after is not None and len(batches) == stop_after:
                saved = loader.state_dict()
                break
        return batches, loader.num_samples_yielded, saved
    finally:
        os.environ.pop("STREAMING_BATCH_READS", None)


@pytest.mark.slow  # DataLoader workers start for each generated case: about 40 s
@settings(SETTINGS, max_examples=int(os.environ.get("BATCH_READS_LOADER_EXAMPLES", "12")))
@given(
    case=datasets(max_samples=60).filter(lambda case: "json" not in case["columns"].values()),
    options=st.fixed_dictionaries(
        {
            "batch_size": st.integers(1, 8),
            "workers": st.sampled_from([0, 1, 2]),
            "drop_last": st.booleans(),
            "shuffle": st.booleans(),
            "shuffle_algo": st.sampled_from(["py1e", "py1s", "naive"]),
        }
    ),
    topology=st.sampled_from(TOPOLOGIES),
    stop_after=st.integers(1, 4),
)
def test_the_loader_yields_the_same_batches_either_way(
    tmp_path_factory, monkeypatch, case, options, topology, stop_after
):
    for name, value in topology.items():
        monkeypatch.setenv(name, value)
    local = fresh(tmp_path_factory, case)
    per_sample = collated(lambda: run_loader(local, False, options))
    columnar = collated(lambda: run_loader(local, True, options))
    assert per_sample[0] == columnar[0], (per_sample, columnar)
    if per_sample[0] == "error":  # e.g. default_collate refuses a column: the same error, through torch's worker
        assert per_sample[1][0] is columnar[1][0]
        return
    assert_same_value(columnar[1][0], per_sample[1][0], "batches")
    assert columnar[1][1] == per_sample[1][1]
    # Resumption: the state after a few batches, and the rest of the epoch from it, are the same.
    first = run_loader(local, True, options, stop_after=stop_after)
    if first[2] is None:
        return
    expected_first = run_loader(local, False, options, stop_after=stop_after)
    assert first[2] == expected_first[2]
    rest = run_loader(local, True, options, state=first[2])[0]
    assert_same_value(rest, run_loader(local, False, options, state=first[2])[0], "resumed")


def test_a_custom_collate_or_item_override_keeps_the_per_sample_path(tmp_path):
    case = {"columns": {"n": "int32"}, "samples": [{"n": np.int32(i)} for i in range(10)], "size_limit": None}
    local = write(str(tmp_path / "ds"), case)

    class Doubled(StreamingDataset):
        def get_item(self, sample_id: int, retry: int = 7) -> Any:
            return {"n": super().get_item(sample_id, retry)["n"] * 2}

    doubled = StreamingDataLoader(Doubled(local=local, batch_size=5), batch_size=5)
    assert [b["n"].tolist() for b in doubled] == [[0, 2, 4, 6, 8], [10, 12, 14, 16, 18]]
    with pytest.raises(TypeError, match="overrides __getitem__ or get_item"):
        Doubled(local=local, batch_size=5).iter_batches()
    seen = []

    def collate(samples):
        seen.append(type(samples).__name__)
        return default_collate(samples)

    loader = StreamingDataLoader(StreamingDataset(local=local, batch_size=5), batch_size=5, collate_fn=collate)
    assert [b["n"].tolist() for b in loader] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert seen == ["list", "list"]


def test_large_tabular_batches_match(tmp_path):
    """Records of 100 float32 features and a label, batches of 1,000 drawn across shards by the shuffle."""
    rng = np.random.default_rng(0)
    features = rng.standard_normal((3000, 100)).astype(np.float32)
    columns = {f"f{i:02d}": "float32" for i in range(100)} | {"label": "int64"}
    with MDSWriter(out=str(tmp_path / "ds"), columns=columns, size_limit=200_000) as writer:
        for k in range(3000):
            writer.write({**{f"f{i:02d}": features[k, i] for i in range(100)}, "label": np.int64(k)})
    options = {"batch_size": 1000, "workers": 2, "drop_last": False, "shuffle": True, "shuffle_algo": "py1e"}
    columnar, count, _ = run_loader(str(tmp_path / "ds"), True, options)
    per_sample, expected_count, _ = run_loader(str(tmp_path / "ds"), False, options)
    assert count == expected_count == 3000
    assert_same_value(columnar, per_sample, "batches")
    for batch in columnar:
        labels = batch["label"].numpy()
        assert math.isclose(float(batch["f07"][0]), float(features[labels[0], 7]))
