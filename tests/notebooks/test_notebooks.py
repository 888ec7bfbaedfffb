"""The three notebooks, unmodified, through the local runner: once with `/Volumes/...` served by the fake
Databricks server (Files API, off Databricks), once with `/Volumes/...` as a mounted local path (on classic,
standard and serverless compute as run_local's access modes give them); and without credentials.

These run in-process with the install cell printed; on the FUSE volume the notebooks also run with their install
cell executed, as a user runs them (`test_install.py`).
"""

from __future__ import annotations

import json
import os

import pytest

from streaming.storage.errors import CredentialsError
from tests.notebooks.conftest import NOTEBOOKS
from tests.notebooks.helpers import assert_shards_written_as_indexed, dataset_ids, files_below, write_events

CONVERT = str(NOTEBOOKS / "01_convert_to_mds.py")
TRAIN = str(NOTEBOOKS / "02_train_from_volume.py")
JOB = str(NOTEBOOKS / "03_incremental_job.py")
ROWS = 1200
BATCH = 50
# Notebooks 01 and 02 on the FUSE volume: the install runs of test_install.py. Notebook 03's install run there
# covers its first run only (each run outside this process starts Spark anew), so its runs stay here on all three.
IN_PROCESS_VOLUMES = pytest.mark.parametrize("volume", ["files_api", "mounted"], indirect=True)
# The compute each volume's runs stand in for (run_local's --access-mode): off Databricks the volume is reached
# through the Files API; on Databricks it is mounted, and notebook 2 (TorchDistributor) needs classic compute.
CONVERT_MODES = {"files_api": "local", "mounted": "classic"}
JOB_MODES = {"files_api": "local", "mounted": "serverless", "fuse": "standard"}


@IN_PROCESS_VOLUMES
def test_convert_then_train_from_the_volume(runner, spark, volume, tmp_path):
    out = volume.path("demo")
    mode = CONVERT_MODES[volume.kind]
    widgets = {"out": out, "rows": str(ROWS), "size_limit": "16kb"}
    converted = runner.run_notebook(CONVERT, widgets, spark, quiet=True, access_mode=mode)
    summary = json.loads(converted.exit_value)
    assert summary["samples"] == summary["dataset_samples"] == ROWS and summary["shards"] > 2
    assert_shards_written_as_indexed(volume.disk("demo"))

    checkpoints = tmp_path / "checkpoints"
    trained = runner.run_notebook(
        TRAIN,
        {"data": out, "cache": str(tmp_path / "cache"), "checkpoints": str(checkpoints), "batch_size": str(BATCH)},
        spark,
        quiet=True,
        access_mode=mode,
    )
    result = json.loads(trained.exit_value)
    steps = ROWS // BATCH
    assert result["single_steps"] == steps
    assert result["resumed_at"] == steps // 2 * BATCH
    assert result["resumed_samples"] == ROWS - steps // 2 * BATCH
    distributed = result["distributed"]
    assert distributed["world_size"] == 2 and distributed["ranks_resumed_ok"] == [True, True]
    half = ROWS // 2
    assert distributed["sample_in_epoch"] == (half // BATCH) // 2 * BATCH * 2
    assert distributed["ids_seen_by_every_rank"] == 0
    assert sorted(path.name for path in checkpoints.iterdir()) == ["distributed.pt", "single.pt"]


def test_incremental_job_appends_each_version_once(runner, spark, volume, tmp_path):
    table = tmp_path / "events"
    change_data_feed = volume.kind == "files_api"
    write_events(table, 0, 100, change_data_feed=change_data_feed)
    widgets = {"table": str(table), "out": volume.path("events")}

    def run_job() -> dict:
        run = runner.run_notebook(JOB, widgets, spark, quiet=True, access_mode=JOB_MODES[volume.kind])
        return json.loads(run.exit_value)

    first = run_job()
    assert (first["method"], first["previous_version"], first["version"], first["samples"]) == (
        "snapshot",
        None,
        0,
        100,
    )
    before = files_below(volume.disk("events"))
    index_before = volume.disk("events/index.json").read_bytes()
    again = run_job()
    assert (again["method"], again["version"], again["samples"]) == ("up_to_date", 0, 0)
    assert files_below(volume.disk("events")) == before
    assert volume.disk("events/index.json").read_bytes() == index_before

    assert write_events(table, 100, 130) == 1
    added = run_job()
    method = "change_data_feed" if change_data_feed else "snapshot_diff"
    assert (added["method"], added["previous_version"], added["version"], added["samples"]) == (method, 0, 1, 30)
    assert run_job()["method"] == "up_to_date"
    assert dataset_ids(volume.path("events"), tmp_path / "cache") == list(range(130))


def test_incremental_job_mirrors_deletes_with_its_mode_widget(runner, spark, tmp_path):
    """mode=mirror, key=id: a deleted row leaves the dataset at the next run (the semantics: tests/incremental)."""
    from deltalake import DeltaTable

    table = tmp_path / "events"
    write_events(table, 0, 100, change_data_feed=True)
    widgets = {"table": str(table), "out": str(tmp_path / "mirror"), "mode": "mirror", "key": "id"}
    first = json.loads(runner.run_notebook(JOB, widgets, spark, quiet=True).exit_value)
    assert (first["mode"], first["samples"]) == ("mirror", 100)
    DeltaTable(str(table)).delete("id = 7 OR id = 70")
    later = json.loads(runner.run_notebook(JOB, widgets, spark, quiet=True).exit_value)
    assert (later["method"], later["removed"], later["shards_rewritten"]) == ("change_data_feed", 2, 1)
    assert dataset_ids(str(tmp_path / "mirror"), tmp_path / "cache") == [i for i in range(100) if i not in (7, 70)]


def test_incremental_job_creates_its_demo_table_when_it_is_missing(runner, spark, tmp_path, private_tempdir):
    """Run as it comes (no `table` widget): the default demo table is created, converted, then up to date."""
    widgets = {"out": str(tmp_path / "events")}
    first = json.loads(runner.run_notebook(JOB, widgets, spark, quiet=True).exit_value)
    assert (first["method"], first["version"], first["samples"]) == ("snapshot", 0, 100)
    assert first["table"].endswith("mds_demo/events_table") and first["table"].startswith(private_tempdir)
    again = json.loads(runner.run_notebook(JOB, widgets, spark, quiet=True).exit_value)
    assert (again["method"], again["version"]) == ("up_to_date", 0), "an existing demo table is left as it is"
    assert dataset_ids(str(tmp_path / "events"), tmp_path / "cache") == list(range(100))


@pytest.mark.parametrize("access_mode", ["local", "classic", "standard", "serverless"])
def test_incremental_job_runs_on_its_defaults_in_every_access_mode(runner, spark, access_mode, private_tempdir):
    """As docs/spark.md runs it (`run_local.py notebooks/03_incremental_job.py --access-mode serverless`), no widget
    but `install`: a local run standing in for any compute keeps its demo table and dataset in a local folder (it has
    no Unity Catalog), creates the table with delta-rs and converts it."""
    run = runner.run_notebook(JOB, {}, spark, quiet=True, access_mode=access_mode)
    first = json.loads(run.exit_value)
    assert first["table"].startswith(private_tempdir) and first["path"].startswith(private_tempdir), first
    assert (first["method"], first["version"], first["samples"]) == ("snapshot", 0, 100)
    # An append run's exit record holds no mirror rewrite counters (bytes_written 0 read as "wrote nothing").
    assert first["shards"] >= 1 and "bytes_written" not in first and "removed" not in first
    assert "RUN_LOCAL_ACCESS_MODE" not in os.environ and "DATABRICKS_RUNTIME_VERSION" not in os.environ


def test_missing_credentials_say_what_to_set(runner, spark, tmp_path, no_databricks_credentials, capsys):
    widgets = {"out": "/Volumes/main/default/vol/no-credentials/demo", "rows": "10"}
    with pytest.raises(
        CredentialsError,
        match="default auth: cannot configure default credentials; set "
        "DATABRICKS_HOST and DATABRICKS_TOKEN, or DATABRICKS_CONFIG_PROFILE",
    ):
        runner.run_notebook(CONVERT, widgets, spark, quiet=True)

    argv = [CONVERT, "--in-place"] + [f"--widget={name}={value}" for name, value in widgets.items()]
    assert runner.main(argv) == 1
    err = capsys.readouterr().err
    assert "set DATABRICKS_HOST and DATABRICKS_TOKEN" in err and "01_convert_to_mds.py failed" in err
    assert spark.sparkContext._jsc is not None, "the CLI must not stop a session it did not start"
