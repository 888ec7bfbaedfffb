"""The ``merge_index=False`` layout on its own: which partition folders are kept and which files are deleted."""

from __future__ import annotations

from streaming.convert.attempt import Attempt
from streaming.convert.commit import discard_run, publish_folders
from streaming.format.runs import partition_folder
from streaming.storage.dataset_root import DatasetRoot
from tests.spark.helpers import files_under
from tests.spark.test_commit import shard, touch, write_attempt_files


def folder_attempt(partition: int, number: int, run: str = "r1") -> Attempt:
    shards = [shard("shard.00000.mds", 3)]
    return Attempt(partition, number, partition_folder(run, partition, number), shards, 3, 100, 0)


def test_successful_attempts_stay_one_folder_per_partition(tmp_path):
    root = str(tmp_path / "ds")
    kept = [folder_attempt(0, 1), folder_attempt(1, 3)]
    for item in [*kept, folder_attempt(0, 2), folder_attempt(1, 4)]:
        write_attempt_files(root, item)
    touch(root, "someone-else/file")
    publish_folders(DatasetRoot(root), "r1", kept, "error")
    assert files_under(root) == {
        "r1-part-00000-attempt-1/index.json",
        "r1-part-00000-attempt-1/shard.00000.mds",
        "r1-part-00001-attempt-3/index.json",
        "r1-part-00001-attempt-3/shard.00000.mds",
        "someone-else/file",
    }
    new = folder_attempt(0, 7, run="r2")
    write_attempt_files(root, new)
    publish_folders(DatasetRoot(root), "r2", [new], "overwrite")
    assert files_under(root) == {"r2-part-00000-attempt-7/index.json", "r2-part-00000-attempt-7/shard.00000.mds"}


def test_a_failed_run_removes_only_its_own_folders(tmp_path):
    root = str(tmp_path / "ds")
    write_attempt_files(root, folder_attempt(0, 1, run="old"))
    write_attempt_files(root, folder_attempt(0, 2, run="failed"))
    discard_run(DatasetRoot(root), "failed", flat=True)
    assert files_under(root) == {"old-part-00000-attempt-1/index.json", "old-part-00000-attempt-1/shard.00000.mds"}
