"""A stream over a folder of Parquet files (`streaming.dataset.parquet_stream`): rows, types, order, resumption,
mixing, and what the folder may not do.

The folders are written by pyarrow (``pq.write_to_dataset`` with Hive partition folders, as Spark lays them out,
plus a writer's hidden files); Spark-written folders are read in tests/delta_lake/test_stream_delta_lake.py. The
oracle of the rows is what was written; of the types, the package's own conversion of the same files
(``convert_files`` read back by `LocalDataset`), the partition column added as the stream types it.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset, MDSWriter, Stream, StreamingDataset
from streaming.convert.arrow_engine import convert_files
from streaming.dataset.parquet_stream import ParquetStream
from tests.helpers import ids_resumed_on_two_ranks, mixed_with_an_mds_stream

ROWS = 600


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([i / 7 for i in ids], pa.float64()),
            "name": pa.array([None if i % 9 == 0 else f"row {i}" for i in ids], pa.string()),
            "vec": pa.array([[float(i), -1.0, 0.5] for i in ids], pa.list_(pa.float32())),
            "year": pa.array([2020 + i % 3 for i in ids], pa.int64()),
        }
    )


def _folder(path: str, appends: int = 3) -> str:
    """``appends`` writes, each a file per ``year=...`` folder; a writer's ``_SUCCESS`` and a hidden checksum."""
    per = ROWS // appends
    for number in range(appends):
        pq.write_to_dataset(
            _rows(number * per, per),
            path,
            partition_cols=["year"],
            basename_template=f"part-{number}-{{i}}.parquet",
            row_group_size=70,
        )
    open(os.path.join(path, "_SUCCESS"), "w").close()
    open(os.path.join(path, "year=2020", ".part-0-0.parquet.crc"), "w").close()
    return path


def _ids(dataset: Any) -> list[int]:
    return [int(sample["id"]) for sample in dataset]


def test_a_folder_of_parquet_files_streams_its_rows_typed_as_the_conversion(tmp_path):
    folder = _folder(str(tmp_path / "folder"))
    dataset = StreamingDataset(remote=folder, local=str(tmp_path / "c"), batch_size=8)
    stream = dataset.streams[0]
    assert type(stream) is ParquetStream and stream.version is None
    names = [file.name for file in stream.pinned.files]
    assert names == sorted(f"year={y}/part-{n}-0.parquet" for y in (2020, 2021, 2022) for n in range(3))
    assert dataset.shards_per_stream.tolist() == [9] and dataset.num_samples == ROWS
    samples = [dataset[i] for i in range(dataset.num_samples)]
    assert sorted(int(s["id"]) for s in samples) == list(range(ROWS))
    # Typed as the conversion of the same files types them; the partition column from the folder names, int64.
    convert_files(folder, str(tmp_path / "mds"))
    converted = {int(s["id"]): s for s in LocalDataset(str(tmp_path / "mds"))}
    for sample in samples:
        expected = converted[int(sample["id"])]
        assert set(sample) == {*expected, "year"}
        for key, value in expected.items():
            if isinstance(value, np.ndarray):
                assert sample[key].dtype == value.dtype and np.array_equal(sample[key], value)
            else:
                assert type(sample[key]) is type(value) and sample[key] == value, (key, sample, expected)
        assert type(sample["year"]) is np.int64 and sample["year"] == 2020 + int(sample["id"]) % 3
    assert list(_ids(dataset)) and sorted(_ids(dataset)) == list(range(ROWS))


def test_same_order_on_a_rerun_resumption_on_another_world_size_and_mixing(tmp_path):
    folder = _folder(str(tmp_path / "folder"))

    def make(cache: str) -> StreamingDataset:
        return StreamingDataset(
            remote=folder, local=str(tmp_path / cache), batch_size=8, shuffle=True, num_canonical_nodes=2
        )

    first = _ids(make("a"))
    assert _ids(make("b")) == first
    dataset = make("d")
    state = json.loads(json.dumps({**dataset.state_dict(120, True), "epoch": 0}))
    assert "delta_versions" not in state  # a folder has no version to record
    assert sorted(first[:120] + ids_resumed_on_two_ranks(make, state)) == sorted(first)

    mixed = mixed_with_an_mds_stream(folder, tmp_path)
    ids = _ids(mixed)
    assert (
        len(ids) == 200
        and sum(i >= 10_000 for i in ids) == 100
        and set(ids) - set(range(10_000, 10_100)) <= set(range(ROWS))
    )
    state = mixed.state_dict(40, True)
    assert "delta_versions" not in state


def test_chosen_by_name_and_bounded_by_the_cache_limit(tmp_path):
    folder = _folder(str(tmp_path / "folder"))
    largest = max(os.path.getsize(os.path.join(root, f)) for root, _, fs in os.walk(folder) for f in fs)
    dataset = StreamingDataset(
        remote=folder, local=str(tmp_path / "c"), batch_size=8, stream_name="parquet", cache_limit=5 * largest
    )
    assert type(dataset.streams[0]) is ParquetStream
    assert sorted(_ids(dataset)) == list(range(ROWS))
    assert 0 < dataset.cache_usage <= 5 * largest


def test_a_text_partition_and_a_null_one(tmp_path):
    folder = tmp_path / "folder"
    for key, values in (("a", [1, 2, 3]), ("__HIVE_DEFAULT_PARTITION__", [4, 5])):
        (folder / f"k={key}").mkdir(parents=True)
        pq.write_table(pa.table({"v": pa.array(values, pa.int64())}), str(folder / f"k={key}" / "f.parquet"))
    dataset = StreamingDataset(remote=str(folder), local=str(tmp_path / "c"), batch_size=1)
    assert sorted((int(s["v"]), s["k"]) for s in dataset) == [(1, "a"), (2, "a"), (3, "a"), (4, None), (5, None)]


def test_a_link_in_the_folder_is_not_followed(tmp_path):
    folder = _folder(str(tmp_path / "folder"))
    pq.write_table(_rows(5000, 10), str(tmp_path / "outside.parquet"))
    os.symlink(str(tmp_path / "outside.parquet"), os.path.join(folder, "year=2020", "zz.parquet"))
    with pytest.raises(ValueError, match="zz.parquet"):
        StreamingDataset(remote=folder, local=str(tmp_path / "c"), batch_size=8)


def test_files_giving_a_column_two_types_are_refused(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), str(folder / "a.parquet"))
    pq.write_table(pa.table({"id": pa.array(["one"], pa.string())}), str(folder / "b.parquet"))
    with pytest.raises(ValueError, match="give a column two types"):
        StreamingDataset(remote=str(folder), local=str(tmp_path / "c"), batch_size=8)


def test_an_mds_folder_or_an_empty_one_is_no_parquet_folder(tmp_path):
    with MDSWriter(out=str(tmp_path / "mds"), columns={"id": "int64"}) as writer:
        writer.write({"id": 1})
    pq.write_table(_rows(0, 5), str(tmp_path / "mds" / "extra.parquet"))  # an index makes it an MDS dataset
    dataset = StreamingDataset(remote=str(tmp_path / "mds"), local=str(tmp_path / "c"), batch_size=1)
    assert type(dataset.streams[0]) is Stream and _ids(dataset) == [1]
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        StreamingDataset(remote=str(tmp_path / "empty"), local=str(tmp_path / "c2"), batch_size=1)
    with pytest.raises(FileNotFoundError, match="No Parquet files"):
        StreamingDataset(
            remote=str(tmp_path / "empty"), local=str(tmp_path / "c3"), batch_size=1, stream_name="parquet"
        )
