"""One Spark task attempt (``write_attempt``, what ``PartitionWriter`` runs in each task) streaming its shards
through ``UploadingSink``: a storage failure at any point surfaces as the storage error, naming the file and
URL, and the attempt leaves nothing behind (neither at the destination nor in its staging folder).

The destination is a local directory written through the sink (``direct=False``, as for an object store),
in which a directory occupies the name of one file, so that the backend's rename of that file really fails.
No SparkSession is needed: the task's code runs here as it runs in an executor.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from streaming.convert.attempt import TaskConfig, write_attempt
from streaming.dataset.local import LocalDataset
from streaming.format.index import INDEX_BASENAME
from streaming.format.runs import attempt_folder
from streaming.storage.errors import StorageError

ROWS = 40


def _config(destination: str) -> TaskConfig:
    return TaskConfig(
        destination=destination,
        run="run",
        columns={"id": "int64", "text": "str"},
        compression=None,
        hashes=(),
        size_limit=1000,
        direct=False,
    )


def _batches() -> list[pa.RecordBatch]:
    ids = list(range(ROWS))
    batch = pa.RecordBatch.from_pydict({"id": pa.array(ids, pa.int64()), "text": [str(i) * 40 for i in ids]})
    return [batch.slice(0, ROWS // 2), batch.slice(ROWS // 2)]


def _files_below(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files)


def test_an_attempt_streams_its_shards_to_the_destination(tmp_path, private_tempdir):
    destination = str(tmp_path / "out")
    record = write_attempt(_config(destination), iter(_batches()), 3, 17)
    folder = attempt_folder("run", 3, 17)
    assert record.directory == folder and record.samples == ROWS
    shards = record.shards
    assert len(shards) >= 4
    assert [int(sample["id"]) for sample in LocalDataset(os.path.join(destination, folder))] == list(range(ROWS))
    assert os.listdir(private_tempdir) == [], "the sink deletes the staging folder"


def _shard_count(tmp_path) -> int:
    record = write_attempt(_config(str(tmp_path / "clean")), iter(_batches()), 0, 1)
    return len(record.shards)


@pytest.mark.parametrize("position", ["first shard", "middle shard", "last shard", "index"])
def test_a_storage_failure_anywhere_in_the_task_surfaces_as_itself(tmp_path, private_tempdir, position):
    count = _shard_count(tmp_path)
    name = {
        "first shard": "shard.00000.mds",
        "middle shard": f"shard.{count // 2:05}.mds",
        "last shard": f"shard.{count - 1:05}.mds",
        "index": INDEX_BASENAME,
    }[position]
    destination = str(tmp_path / "out")
    blocked = os.path.join(destination, attempt_folder("run", 0, 1), name)
    os.makedirs(blocked)
    with pytest.raises(StorageError) as raised:
        write_attempt(_config(destination), iter(_batches()), 0, 1)
    assert raised.value.url == blocked and blocked in str(raised.value)
    assert _files_below(destination) == [], "the failed attempt removes every file it wrote"
    assert os.listdir(private_tempdir) == [], "and its staging folder"


def test_a_failed_upload_in_a_spark_job_reaches_the_driver_as_the_storage_error(spark, tmp_path, monkeypatch):
    """End to end: executors stream through ``UploadingSink`` (as for an object store) into a destination where
    a file occupies the run's folder; the job fails with the storage error naming the URL, not a later one."""
    from streaming.spark import dataframe_to_mds
    from streaming.storage.dataset_root import DatasetRoot

    out = tmp_path / "out"
    out.mkdir()
    (out / "run-fixed").write_text("in the way")
    monkeypatch.setattr("streaming.convert.driver.new_run_id", lambda: "run-fixed")
    monkeypatch.setattr(DatasetRoot, "is_local", property(lambda self: False))
    with pytest.raises(Exception) as raised:  # Spark wraps the task's error in its own type
        dataframe_to_mds(spark.range(0, 100, 1, 2), str(out), mode="overwrite", progress=False)
    text = str(raised.value)
    assert "StorageError" in text and str(out / "run-fixed" / "part-0000") in text, text[-2000:]
    assert "TypeError" not in text
    assert _files_below(str(out)) == ["run-fixed"], "nothing was published"
