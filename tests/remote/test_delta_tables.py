"""Delta tables in a bucket (S3 on the SeaweedFS server), read without Spark: ``mds-streaming convert`` and the
scheduled job in both modes, through the package's own replay of the log (`streaming.delta.log_replay`) and
delta-rs's object store.

Two tables, each written by Delta Lake itself and copied into the bucket as its writer left it, the log first up to
an older version (the job's first run), then whole (its second run):

* delta-rs's own: appends, a classic checkpoint, an UPDATE and a DELETE after it; its oracle is delta-rs's reader;
* Delta Lake on Spark's ``tests/fixtures/delta/v2_sidecars`` (see ``make_tables.py`` there): V2 checkpoints whose
  actions sit in sidecar files, partitions, deletion vectors and the Change Data Feed; its oracle is Spark's rows
  of each version, recorded beside it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from streaming import LocalDataset
from streaming.incremental import incremental_to_mds
from streaming.storage.registry import storage_for
from tests.cli.conftest import run_cli
from tests.remotes import Remote

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "delta" / "v2_sidecars"
_VERSIONED = re.compile(r"^(\d{20})\.")


def upload(table: Path, url: str, up_to: int | None = None) -> None:
    """Copy the table's files under ``url``: every data file, and the log's files of versions up to ``up_to``."""
    storage = storage_for(url)
    for path in sorted(table.rglob("*")):
        if not path.is_file() or path.name.endswith(".crc"):
            continue
        relative = path.relative_to(table).as_posix()
        match = _VERSIONED.match(path.name)
        if relative.startswith("_delta_log/") and up_to is not None:
            if path.name == "_last_checkpoint" or (match and int(match.group(1)) > up_to):
                continue
        storage.put(str(path), f"{url}/{relative}")


def _dataset(out: Path, columns: list[str]) -> Counter:
    return Counter(tuple(_plain(sample[name]) for name in columns) for sample in LocalDataset(str(out)))


def _plain(value: object) -> object:
    return value.item() if hasattr(value, "item") else value


def _follow(url: str, out: Path, rows_at: Callable[[int], Counter], columns: list[str], grow: Callable[[], None]):
    """Convert and follow the table at ``url`` in both modes across ``grow`` (which uploads its newer versions);
    each dataset is compared with ``rows_at`` (the oracle's rows of a version)."""
    first: dict[str, int] = {}
    for mode in ("append", "mirror"):
        options = {"mode": mode, "key": ["id"]} if mode == "mirror" else {}
        result = incremental_to_mds(url, str(out / mode), progress=False, **options)
        first[mode] = result.version
        assert _dataset(out / mode, columns) == rows_at(result.version), mode
    grow()
    code, _, stderr = run_cli("convert", url, str(out / "convert"))
    assert code == 0, stderr
    newest = max(first.values())
    for mode in ("append", "mirror"):
        options = {"mode": mode, "key": ["id"]} if mode == "mirror" else {}
        result = incremental_to_mds(url, str(out / mode), progress=False, **options)
        assert result.previous_version == first[mode] and result.version > newest
        newest_rows = rows_at(result.version)
        held = rows_at(first[mode])
        wanted = newest_rows if mode == "mirror" else held + (newest_rows - held)
        assert _dataset(out / mode, columns) == wanted, mode
    assert _dataset(out / "convert", columns) == newest_rows


def test_a_delta_rs_table_with_a_checkpoint_in_a_bucket(remote_factory: Callable[[str], Remote], tmp_path):
    from deltalake import DeltaTable, write_deltalake

    bucket = remote_factory("s3")
    table, url = tmp_path / "table", bucket.url("events")
    for start in range(0, 12, 3):
        write_deltalake(str(table), pa.table({"id": list(range(start, start + 3)), "v": ["x"] * 3}), mode="append")
    DeltaTable(str(table)).create_checkpoint()
    write_deltalake(str(table), pa.table({"id": [12], "v": ["y"]}), mode="append")
    held = DeltaTable(str(table)).version()
    DeltaTable(str(table)).update(predicate="id = 4", updates={"v": "'changed'"})
    DeltaTable(str(table)).delete("id = 7")
    write_deltalake(str(table), pa.table({"id": [13], "v": ["z"]}), mode="append")
    upload(table, url, up_to=held)

    def rows_at(version: int) -> Counter:
        rows = DeltaTable(str(table), version=version).to_pyarrow_table().to_pylist()
        return Counter((row["id"], row["v"]) for row in rows)

    _follow(url, tmp_path, rows_at, ["id", "v"], lambda: upload(table, url))


def test_a_delta_lake_table_in_v2_checkpoints_with_sidecars_in_a_bucket(
    remote_factory: Callable[[str], Remote], tmp_path
):
    log = sorted(os.listdir(FIXTURE / "_delta_log"))
    assert any(re.fullmatch(r"\d{20}\.checkpoint\.[0-9a-f-]{36}\.(json|parquet)", name) for name in log), log
    assert os.listdir(FIXTURE / "_delta_log" / "_sidecars"), log
    expected = json.loads(FIXTURE.with_name(FIXTURE.name + ".expected.json").read_text())
    bucket = remote_factory("s3")
    url = bucket.url("v2")
    upload(FIXTURE, url, up_to=3)

    def rows_at(version: int) -> Counter:
        return Counter(tuple(row) for row in expected[str(version)])

    _follow(url, tmp_path, rows_at, ["id", "v", "p"], lambda: upload(FIXTURE, url))


@pytest.mark.parametrize("version", [2, 5])
def test_a_whole_version_of_the_v2_table_in_a_bucket(remote_factory: Callable[[str], Remote], tmp_path, version):
    """A version at a V2 checkpoint (its files from the checkpoint's sidecars) and one past it, read whole."""
    from streaming.delta.scan import snapshot_rows
    from streaming.delta.snapshot import Snapshot

    expected = json.loads(FIXTURE.with_name(FIXTURE.name + ".expected.json").read_text())
    url = remote_factory("s3").url("v2")
    upload(FIXTURE, url)
    snapshot = Snapshot.open(url, version)
    rows = snapshot_rows(snapshot, ["id", "v", "p"]).to_pylist()
    assert Counter((row["id"], row["v"], row["p"]) for row in rows) == Counter(
        tuple(row) for row in expected[str(version)]
    )
