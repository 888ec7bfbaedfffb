"""A stream over a Delta table (`streaming.dataset.delta_stream`): rows, types, order, resumption and mixing.

The tables are written by delta-rs (several appends, a DELETE, an overwrite, VACUUM) and, for deletion vectors
inline and in files, by `tests.incremental.row_tracked_table.TrackedTable`, which writes the log as the protocol
says and has delta-rs read every version back. The oracle of the types is the package's own conversion of the same
table (``convert_files`` read back by `LocalDataset`); of the rows, what the writer put in; of the order, the
properties an MDS stream has: the same samples in the same order on a re-run, a checkpoint resumed on another world
size yielding exactly the rest of the epoch.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import subprocess
import sys
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pytest

from streaming import LocalDataset, MDSWriter, Stream, StreamingDataset
from streaming.convert.arrow_engine import convert_files
from streaming.dataset.dataloader import StreamingDataLoader
from streaming.dataset.delta_stream import VERSIONS_KEY, DeltaStream
from streaming.delta.errors import HistoryUnavailableError
from tests.helpers import ids_resumed_on_two_ranks
from tests.incremental.row_tracked_table import TrackedTable

ROWS = 600


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "small": pa.array([i % 100 for i in ids], pa.int16()),
            "x": pa.array([i / 7 for i in ids], pa.float64()),
            "name": pa.array([None if i % 9 == 0 else f"row {i}" for i in ids], pa.string()),
            "flag": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
            "price": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(10, 2)),
            "day": pa.array([datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 300) for i in ids], pa.date32()),
            "at": pa.array(
                [datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)] * count, pa.timestamp("us", "UTC")
            ),
            "blob": pa.array([bytes([i % 256]) * (i % 5) for i in ids], pa.binary()),
            "vec": pa.array([[float(i), -1.0, 0.5] for i in ids], pa.list_(pa.float32())),
            "part": pa.array([f"p{i % 3}" for i in ids], pa.string()),
        }
    )


def _table(path: str, files: int = 6) -> str:
    """A table of ``files`` appends (partitioned, so each append writes a file per partition), with a DELETE."""
    per = ROWS // files
    for number in range(files):
        deltalake.write_deltalake(path, _rows(number * per, per), mode="append", partition_by=["part"])
    deltalake.DeltaTable(path).delete("id % 10 = 3")
    return path


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        return (
            isinstance(left, np.ndarray)
            and isinstance(right, np.ndarray)
            and left.dtype == right.dtype
            and (np.array_equal(left, right))
        )
    return type(left) is type(right) and left == right


def _by_id(samples) -> dict[int, dict[str, Any]]:
    return {int(sample["id"]): sample for sample in samples}


def test_a_remote_holding_a_delta_table_streams_its_rows_typed_as_the_conversion(tmp_path):
    table = _table(str(tmp_path / "table"))
    dataset = StreamingDataset(remote=table, local=str(tmp_path / "cache"), batch_size=16, shuffle=True)
    stream = dataset.streams[0]
    assert isinstance(stream, DeltaStream) and stream.version == 6
    assert dataset.shards_per_stream.tolist() == [len(deltalake.DeltaTable(table).file_uris())]
    expected = [i for i in range((ROWS // 6) * 6) if i % 10 != 3]
    assert sorted(int(dataset[i]["id"]) for i in range(dataset.num_samples)) == expected
    streamed = _by_id(dataset)
    assert sorted(streamed) == expected

    converted = tmp_path / "mds"
    convert_files(table, str(converted), kind="delta")
    mds = _by_id(LocalDataset(str(converted)))
    assert sorted(mds) == expected
    for key, sample in mds.items():
        got = streamed[key]
        assert set(got) == set(sample)
        assert all(_equal(got[name], value) for name, value in sample.items()), (key, got, sample)
    # The batch path gives the same values, as columns.
    batch = dataset.get_batch(np.arange(dataset.num_samples))
    assert sorted(int(i) for i in batch["id"]) == expected and batch["vec"].shape == (len(expected), 3)
    by_id = {int(i): n for i, n in zip(batch["id"], batch["name"])}
    assert all(by_id[key] == sample["name"] for key, sample in mds.items())


def test_deletion_vectors_inline_and_in_files_are_applied(tmp_path):
    table = TrackedTable(tmp_path / "t", [{"id": i, "name": f"n{i}"} for i in range(40)], deletion_vectors=True)
    table.insert([{"id": i, "name": f"n{i}"} for i in range(40, 90)])
    table.mark_deleted({3, 4, 50}, in_file=False)
    table.mark_deleted({7, 61, 62}, in_file=True)
    dataset = StreamingDataset(remote=str(table.path), local=str(tmp_path / "c"), batch_size=4, shuffle=True)
    samples = [dataset[i] for i in range(dataset.num_samples)]
    assert sorted((int(s["id"]), s["name"]) for s in samples) == sorted(
        (row["id"], row["name"]) for row in table.rows.values()
    )
    assert {int(s["id"]) for s in dataset} == {row["id"] for row in table.rows.values()}
    assert dataset.num_samples == len(table.rows) == 84


def _ids(dataset) -> list[int]:
    return [int(sample["id"]) for sample in dataset]


def test_same_order_on_a_rerun_and_resumption_on_another_world_size(tmp_path):
    table = _table(str(tmp_path / "table"))

    def make(cache: str, **kwargs: Any) -> StreamingDataset:
        return StreamingDataset(
            remote=table, local=str(tmp_path / cache), batch_size=8, shuffle=True, num_canonical_nodes=2, **kwargs
        )

    first = _ids(make("a"))
    assert _ids(make("b")) == first  # another process, another cache: the same order
    assert _ids(make("c", shuffle_seed=7)) != first
    # One rank reads 120 samples and checkpoints; two ranks resume and read exactly the rest of the epoch.
    dataset = make("d")
    consumed = first[:120]
    state = json.loads(json.dumps(dataset.state_dict(120, True)))
    state["epoch"] = 0
    assert state[VERSIONS_KEY] == [6]
    assert sorted(consumed + ids_resumed_on_two_ranks(make, state)) == sorted(first)


def test_a_checkpoint_keeps_its_table_version_and_fails_clearly_once_vacuumed(tmp_path):
    table = _table(str(tmp_path / "table"))

    def make(cache: str) -> StreamingDataset:
        return StreamingDataset(remote=table, local=str(tmp_path / cache), batch_size=8, shuffle=True)

    before = make("a")
    full = _ids(before)
    state = {**before.state_dict(100, True), "epoch": 0}
    deltalake.write_deltalake(table, _rows(10_000, 50), mode="append", partition_by=["part"])
    moved = make("b")
    assert moved.streams[0].version == 7 and moved.num_samples == before.num_samples + 50
    moved.load_state_dict(state)
    assert moved.streams[0].version == 6 and moved.num_samples == before.num_samples
    assert _ids(moved) == full[100:]

    deltalake.write_deltalake(table, _rows(20_000, 30), mode="overwrite", partition_by=["part"])
    deltalake.DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    gone = make("c")
    gone.load_state_dict(state)
    with pytest.raises(HistoryUnavailableError, match="Version 6 of the Delta table .* is gone"):
        _ids(gone)


def test_mixes_with_an_mds_stream_and_loads_through_workers(tmp_path):
    table = _table(str(tmp_path / "table"))
    mds = str(tmp_path / "mds")
    with MDSWriter(out=mds, columns={"id": "int64"}) as writer:
        for i in range(100_000, 100_200):
            writer.write({"id": i})
    streams = [
        Stream(remote=table, local=str(tmp_path / "c1"), proportion=3),
        Stream(remote=mds, local=str(tmp_path / "c2"), proportion=1),
    ]
    dataset = StreamingDataset(streams=streams, batch_size=8, epoch_size=400, shuffle=True)
    ids = _ids(dataset)
    assert len(ids) == 400 and sum(i >= 100_000 for i in ids) == 100
    assert isinstance(streams[0], DeltaStream) and [s.choose for s in streams] == [300, 100]

    # Through DataLoader workers, whose batches the batch path reads as columns (numbers and arrays only here:
    # torch's collate takes no Decimal or None).
    numbers = str(tmp_path / "numbers")
    for start in range(0, 400, 100):
        deltalake.write_deltalake(numbers, _rows(start, 100).select(["id", "x", "vec"]), mode="append")
    single = StreamingDataset(remote=numbers, local=str(tmp_path / "c3"), batch_size=8, shuffle=True)
    batches = list(StreamingDataLoader(single, batch_size=8, num_workers=2))
    assert sorted(int(i) for batch in batches for i in batch["id"]) == list(range(400))
    assert tuple(batches[0]["vec"].shape) == (8, 3) and str(batches[0]["x"].dtype) == "torch.float64"


def test_cache_limit_counts_the_files_bytes(tmp_path):
    table = _table(str(tmp_path / "table"))
    largest = max(os.path.getsize(path) for path in deltalake.DeltaTable(table).file_uris())
    limit = 5 * largest
    dataset = StreamingDataset(remote=table, local=str(tmp_path / "c"), batch_size=8, shuffle=True, cache_limit=limit)
    assert len(_ids(dataset)) == dataset.num_samples
    assert 0 < dataset.cache_usage <= limit


def test_a_version_is_pinned_by_name(tmp_path):
    table = _table(str(tmp_path / "table"))
    dataset = StreamingDataset(
        remote=table, local=str(tmp_path / "c"), batch_size=8, stream_name="delta", stream_config={"version": 1}
    )
    assert dataset.streams[0].version == 1  # two appends: versions 0 and 1
    assert sorted(_ids(dataset)) == list(range(2 * (ROWS // 6)))


def _rewrite_log(table: str, version: int, change) -> None:
    path = os.path.join(table, "_delta_log", f"{version:020d}.json")
    with open(path) as f:
        actions = [json.loads(line) for line in f if line.strip()]
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(change(action)) for action in actions) + "\n")


def test_a_footer_declaring_other_rows_than_the_log_is_refused_before_decoding(tmp_path):
    table = str(tmp_path / "table")
    deltalake.write_deltalake(table, _rows(0, 50).select(["id", "x"]), mode="append")

    def fewer(action: dict) -> dict:
        if "add" in action:
            stats = json.loads(action["add"]["stats"])
            action["add"]["stats"] = json.dumps({**stats, "numRecords": 40})
        return action

    _rewrite_log(table, 0, fewer)
    dataset = StreamingDataset(remote=table, local=str(tmp_path / "c"), batch_size=4)
    assert dataset.num_samples == 40
    with pytest.raises(ValueError, match="declares 50 rows where the table's log says 40"):
        dataset[0]


def test_a_data_file_outside_the_table_is_refused(tmp_path):
    table = str(tmp_path / "table")
    deltalake.write_deltalake(table, _rows(0, 50).select(["id", "x"]), mode="append")

    def outside(action: dict) -> dict:
        if "add" in action:
            action["add"]["path"] = "../elsewhere/" + action["add"]["path"]
        return action

    _rewrite_log(table, 0, outside)
    with pytest.raises(ValueError, match="elsewhere"):
        StreamingDataset(remote=table, local=str(tmp_path / "c"), batch_size=4)


@pytest.mark.parametrize(
    ("remote", "parts"),
    [
        ("main.sales.events", ["main", "sales", "events"]),
        ("sales.events", ["sales", "events"]),
        ("`my-catalog`.`odd.schema`.`t``1`", ["my-catalog", "odd.schema", "t`1"]),
        ("events", None),  # one part: a relative folder
        ("a.b.c.d", None),
        ("data.v1-2", None),  # not a plain word without backticks: a path
        ("runs/sales.events", None),
        ("s3://bucket/sales.events", None),
        ("dbfs:/tables/sales.events", None),
        ("/Volumes/main/sales/events", None),
    ],
)
def test_a_remote_is_a_table_name_only_where_it_is_no_path(remote, parts):
    from streaming.dataset.delta_table_name import table_name

    assert table_name(remote) == parts


def test_a_table_name_that_exists_as_a_local_folder_is_that_folder(tmp_path, monkeypatch):
    from streaming.dataset.delta_table_name import table_name

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sales.events").mkdir()
    assert table_name("sales.events") is None


def test_a_table_name_without_a_spark_session_says_to_give_the_location_or_start_one(tmp_path):
    # A fresh interpreter: no session of another test can be active there.
    code = (
        "import sys\n"
        "from streaming import StreamingDataset\n"
        "from streaming.dataset.delta_table_name import TableNameError\n"
        "try:\n"
        f"    StreamingDataset(remote='main.sales.events', local={str(tmp_path / 'c')!r}, batch_size=1)\n"
        "except TableNameError as err:\n"
        "    print(err, 'pyspark' in sys.modules, sep='\\n')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    message, imported = run.stdout.rstrip("\n").rsplit("\n", 1)
    assert "main.sales.events" in message and "needs an active Spark session" in message
    assert "give the table's location" in message and "DESCRIBE DETAIL" in message
    assert imported == "False"  # nothing imported pyspark to find that out
