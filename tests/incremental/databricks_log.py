"""Commits written by hand into a delta-rs table's ``_delta_log`` as Databricks writes them: what delta-rs cannot do.

Each function writes the table's next commit file following the Delta protocol (``commitInfo``, ``add``/``remove``
with ``dataChange``, ``metaData``) with the operation names and parameters of delta-io/delta's
``DeltaOperations.scala`` and the ``commitInfo`` fields a Databricks runtime adds (``engineInfo``, ``clusterId``,
``isolationLevel``, ``isBlindAppend``, ``operationMetrics``), then checks that delta-rs reads the table at the new
version, so later delta-rs operations go on top of it:

* `create_or_replace_as_select`: ``CREATE OR REPLACE TABLE ... AS SELECT`` (also what ``saveAsTable(mode=
  "overwrite")`` records): every file removed, the new rows added, a new ``metaData`` (the feed switched if asked);
* `restore`: ``RESTORE TABLE ... TO VERSION AS OF v``: the files of version ``v`` added back, the others removed,
  and version ``v``'s ``metaData``;
* `predictive_optimization`: the ``OPTIMIZE`` that predictive optimization (or auto compaction) runs: every data
  file rewritten into one, all with ``dataChange=false``;
* `vacuum_markers`: the ``VACUUM START`` / ``VACUUM END`` pair a vacuum records (no file action).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ENGINE = "Databricks-Runtime/15.4.x-photon-scala2.12"


def _commit_info(operation: str, parameters: dict[str, Any], read_version: int, **extra: Any) -> dict[str, Any]:
    return {
        "commitInfo": {
            "timestamp": int(time.time() * 1000),
            "userId": "4242424242424242",
            "userName": "jobs@example.com",
            "operation": operation,
            "operationParameters": parameters,
            "job": {"jobId": "1234", "jobName": "nightly", "runId": "5678", "jobOwnerId": "4242424242424242"},
            "clusterId": "0101-010101-abcdefgh",
            "readVersion": read_version,
            "isolationLevel": "WriteSerializable",
            "isBlindAppend": False,
            "engineInfo": ENGINE,
            "txnId": str(uuid.uuid4()),
            **extra,
        }
    }


def _current(path: Path) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    """The table's version, its data files (``path``, ``size``) and its ``metaData`` action."""
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    actions = pa.table(table.get_add_actions(flatten=True))
    files = [{"path": p, "size": s} for p, s in zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist())]
    return table.version(), files, _metadata_at(path, table.version())


def _metadata_at(path: Path, version: int) -> dict[str, Any]:
    """The ``metaData`` action in force at ``version`` (read from the commit files, newest first)."""
    for candidate in range(version, -1, -1):
        # One action per "\n"-ended line: splitlines() would also split at a U+0085 or U+2028 inside a value.
        for line in (path / "_delta_log" / f"{candidate:020d}.json").read_text().split("\n"):
            if not line:
                continue
            action = json.loads(line)
            if "metaData" in action:
                return action["metaData"]
    raise AssertionError(f"no metaData action up to version {version} in {path}")


def _remove(file: dict[str, Any], data_change: bool) -> dict[str, Any]:
    return {
        "remove": {
            "path": file["path"],
            "deletionTimestamp": int(time.time() * 1000),
            "dataChange": data_change,
            "extendedFileMetadata": True,
            "partitionValues": {},
            "size": file["size"],
        }
    }


def _write_file(path: Path, rows: pa.Table, data_change: bool) -> dict[str, Any]:
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(rows, path / name, compression="snappy")
    stats = json.dumps({"numRecords": rows.num_rows})
    size = (path / name).stat().st_size
    return {
        "add": {
            "path": name,
            "partitionValues": {},
            "size": size,
            "modificationTime": int(time.time() * 1000),
            "dataChange": data_change,
            "stats": stats,
        }
    }


def _commit(path: Path, version: int, actions: list[dict[str, Any]]) -> int:
    target = path / "_delta_log" / f"{version:020d}.json"
    with open(target, "x", encoding="utf-8") as file:  # as a writer must: never over an existing commit
        file.write("\n".join(json.dumps(action) for action in actions) + "\n")
    from deltalake import DeltaTable

    assert DeltaTable(str(path)).version() == version, f"delta-rs does not read the hand-written commit {target}"
    return version


def create_or_replace_as_select(path: Path, rows: pa.Table, *, feed: bool | None = None) -> int:
    """``CREATE OR REPLACE TABLE t AS SELECT ...`` with ``rows`` (the feed property set as given, else kept)."""
    version, files, metadata = _current(path)
    configuration = dict(metadata.get("configuration") or {})
    if feed is not None:
        configuration["delta.enableChangeDataFeed"] = "true" if feed else "false"
    new_metadata = {**metadata, "configuration": configuration, "createdTime": int(time.time() * 1000)}
    parameters = {
        "isManaged": "true",
        "description": None,
        "partitionBy": "[]",
        "clusterBy": "[]",
        "properties": json.dumps(configuration),
    }
    metrics = {"numFiles": "1", "numOutputRows": str(rows.num_rows), "numOutputBytes": "0"}
    actions = [_commit_info("CREATE OR REPLACE TABLE AS SELECT", parameters, version, operationMetrics=metrics)]
    actions += [_remove(file, True) for file in files]
    actions += [{"metaData": new_metadata}, _write_file(path, rows, True)]
    return _commit(path, version + 1, actions)


def restore(path: Path, to_version: int) -> int:
    """``RESTORE TABLE t TO VERSION AS OF to_version``."""
    from deltalake import DeltaTable

    version, files, metadata = _current(path)
    old = pa.table(DeltaTable(str(path), version=to_version).get_add_actions(flatten=True))
    wanted = dict(zip(old["path"].to_pylist(), old["size_bytes"].to_pylist()))
    current = {file["path"] for file in files}
    actions = [
        _commit_info(
            "RESTORE",
            {"version": to_version, "timestamp": None},
            version,
            operationMetrics={"numRestoredFiles": str(len(set(wanted) - current))},
        )
    ]
    actions += [_remove(file, True) for file in files if file["path"] not in wanted]
    for name, size in wanted.items():
        if name not in current:
            actions.append(
                {
                    "add": {
                        "path": name,
                        "partitionValues": {},
                        "size": size,
                        "modificationTime": int(time.time() * 1000),
                        "dataChange": True,
                    }
                }
            )
    old_metadata = _metadata_at(path, to_version)
    if old_metadata != metadata:
        actions.append({"metaData": old_metadata})
    return _commit(path, version + 1, actions)


def predictive_optimization(path: Path) -> int:
    """The ``OPTIMIZE`` predictive optimization runs: every data file compacted into one, ``dataChange=false``."""
    from deltalake import DeltaTable

    version, files, _ = _current(path)
    rows = DeltaTable(str(path)).to_pyarrow_table()
    parameters = {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": "true"}
    metrics = {"numRemovedFiles": str(len(files)), "numAddedFiles": "1", "numBatches": "1"}
    actions = [
        _commit_info("OPTIMIZE", parameters, version, operationMetrics=metrics, userName="Predictive Optimization")
    ]
    actions += [_remove(file, False) for file in files]
    actions.append(_write_file(path, rows, False))
    return _commit(path, version + 1, actions)


def vacuum_markers(path: Path) -> int:
    """The ``VACUUM START`` and ``VACUUM END`` commits of a vacuum that deleted nothing (two versions)."""
    from deltalake import DeltaTable

    version = DeltaTable(str(path)).version()
    start = {"retentionCheckEnabled": True, "defaultRetentionMillis": 604800000}
    _commit(
        path, version + 1, [_commit_info("VACUUM START", start, version, operationMetrics={"numFilesToDelete": "0"})]
    )
    end = _commit_info("VACUUM END", {"status": "COMPLETED"}, version + 1, operationMetrics={"numDeletedFiles": "0"})
    return _commit(path, version + 2, [end])
