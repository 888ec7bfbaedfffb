"""A Delta table with row tracking, written by hand as the Delta protocol's writers must: what delta-rs cannot do.

delta-rs reads a row-tracked table but refuses to create one, and no Delta jars can be fetched for Spark here.
`TrackedTable` writes the commits itself, following PROTOCOL.md's "Row Tracking" section: ``baseRowId`` above the
high-water mark on every new file, that ``baseRowId`` repeated on the file's ``remove``, the high-water mark kept
in a ``delta.rowTracking`` domain, and the stable id of every row a commit copies written in the hidden
materialized column (so ``UPDATE``, ``DELETE``, ``OPTIMIZE`` keep ids); ``checkpoint`` writes a classic parquet
checkpoint and can drop the commit files before it, as log cleanup does.

It also keeps the ground truth a test judges against: ``rows`` maps each live row's stable id to its values, as
the writer assigned them. Every commit is read back with delta-rs (an independent reader), whose rows must be
exactly ``rows``'s values, so a commit delta-rs would not accept never reaches a test.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, settings

#: How the generated histories on these tables run (``MDS_MIRROR_EXAMPLES`` examples, 20 by default).
GENERATED_RUNS = settings(
    max_examples=int(os.environ.get("MDS_MIRROR_EXAMPLES", "20")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
MATERIALIZED = "_row-id-col-6a1f"
MATERIALIZED_VERSION = "_row-commit-version-col-6a1f"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["rowTracking", "domainMetadata"]}
DELETION_VECTOR_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["rowTracking", "domainMetadata", "deletionVectors"],
}
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_B85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_TEXT_MAP = pa.map_(pa.string(), pa.string())
#: The checkpoint's columns for the actions it holds (PROTOCOL.md, "Checkpoint Schema").
CHECKPOINT_PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
CHECKPOINT_VECTOR = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
CHECKPOINT_METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _TEXT_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", _TEXT_MAP),
        ("createdTime", pa.int64()),
    ]
)
CHECKPOINT_ADD = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", _TEXT_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("deletionVector", CHECKPOINT_VECTOR),
    ]
)


class TrackedTable:
    """A row-tracked table at ``path`` with columns ``id`` and ``name`` (``id`` is data here, not the key)."""

    def __init__(
        self,
        path: Path,
        rows: list[dict[str, Any]],
        *,
        extra_column: str | None = None,
        deletion_vectors: bool = False,
    ) -> None:
        self.path = path
        self.version = -1
        self.high_water = -1
        self.rows: dict[int, dict[str, Any]] = {}
        self.files: dict[str, dict[str, Any]] = {}  # live file path -> its add action
        self.placed: dict[str, list[int]] = {}  # live file path -> the stable ids of its rows as written, in order
        self.deleted: dict[str, set[int]] = {}  # live file path -> the positions its deletion vector marks
        self.vectors_stored = 0  # deletion vector files written (each holds one vector)
        schema = SCHEMA if extra_column is None else SCHEMA.append(pa.field(extra_column, pa.int64()))
        self.schema = schema
        (path / "_delta_log").mkdir(parents=True)
        fields = [
            {"name": f.name, "type": "long" if f.type == pa.int64() else "string", "nullable": True, "metadata": {}}
            for f in schema
        ]
        configuration = {
            "delta.enableRowTracking": "true",
            "delta.rowTracking.materializedRowIdColumnName": MATERIALIZED,
            "delta.rowTracking.materializedRowCommitVersionColumnName": MATERIALIZED_VERSION,
        }
        self.metadata = {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": fields}),
            "partitionColumns": [],
            "configuration": configuration,
            "createdTime": int(time.time() * 1000),
        }
        self.protocol = PROTOCOL if not deletion_vectors else DELETION_VECTOR_PROTOCOL
        adds = [self._new_file(rows, [None] * len(rows))] if rows else []
        head = [{"protocol": self.protocol}, {"metaData": self.metadata}]
        self._commit("CREATE TABLE AS SELECT", adds, [], head=head)

    # -- operations ----------------------------------------------------------------------------------
    def insert(self, rows: list[dict[str, Any]]) -> None:
        self._commit("WRITE", [self._new_file(rows, [None] * len(rows))], [])

    def delete(self, ids: set[int]) -> None:
        """``DELETE WHERE id IN ids`` by copy on write: each file holding one is rewritten without it."""
        self._rewrite("DELETE", lambda row: None if row["id"] in ids else row)

    def update(self, ids: set[int], name: str) -> None:
        """``UPDATE SET name = name WHERE id IN ids``: the rows keep their stable ids (materialized)."""
        self._rewrite("UPDATE", lambda row: {**row, "name": name} if row["id"] in ids else row)

    def mark_deleted(self, ids: set[int], *, in_file: bool) -> None:
        """``DELETE WHERE id IN ids`` with deletion vectors: each file holding one stays, re-added with a vector
        marking those rows (inline in the log, or in a vector file of the table)."""
        adds, removes = [], []
        for path in list(self.files):
            positions = {
                p for p, sid in enumerate(self.placed[path]) if sid in self.rows and self.rows[sid]["id"] in ids
            }
            if not positions:
                continue
            action = self.files[path]
            removes.append(self._remove(path, keep=True))
            marked = self.deleted.get(path, set()) | positions
            for position in positions:
                del self.rows[self.placed[path][position]]
            self.deleted[path] = marked
            vector = self._vector(sorted(marked), in_file)
            stats = json.dumps({"numRecords": len(self.placed[path])})
            self.files[path] = {**action, "deletionVector": vector, "stats": stats, "dataChange": True}
            adds.append(self.files[path])
        self._commit("DELETE", adds, removes)

    def optimize(self) -> None:
        """``OPTIMIZE``: every file compacted into one, ``dataChange=false``, every id materialized."""
        live = list(self.files)
        stable = [sid for path in live for sid in self._live(path)]
        add = self._new_file([self.rows[sid] for sid in stable], stable, data_change=False)
        self._commit("OPTIMIZE", [add], [self._remove(path, data_change=False) for path in live])

    def checkpoint(self, *, drop_commits: bool, parts: int = 1) -> None:
        """A classic checkpoint of the current version, in ``parts`` files (multi-part when more than one); with
        ``drop_commits``, the commit files up to it go (as ``delta.logRetentionDuration`` cleanup removes them),
        so a reader must start from the checkpoint."""
        adds = [
            {
                **action,
                "partitionValues": list(action["partitionValues"].items()),
                "stats": action.get("stats"),
                "deletionVector": action.get("deletionVector"),
            }
            for action in self.files.values()
        ]
        metadata = {
            **self.metadata,
            "format": {"provider": "parquet", "options": []},
            "configuration": list(self.metadata["configuration"].items()),
        }
        blanks = [None] * len(adds)
        table = pa.table(
            {
                "protocol": pa.array([self.protocol, None, *blanks], CHECKPOINT_PROTOCOL),
                "metaData": pa.array([None, metadata, *blanks], CHECKPOINT_METADATA),
                "add": pa.array([None, None, *adds], CHECKPOINT_ADD),
            }
        )
        log = self.path / "_delta_log"
        parts = min(parts, table.num_rows)  # as a writer splits: no part without an action
        if parts == 1:
            pq.write_table(table, log / f"{self.version:020d}.checkpoint.parquet")
        else:  # the protocol's multi-part naming; each action in exactly one part
            for part in range(parts):
                rows = table.take(pa.array(range(part, table.num_rows, parts), pa.int64()))
                pq.write_table(rows, log / f"{self.version:020d}.checkpoint.{part + 1:010d}.{parts:010d}.parquet")
        last = {"version": self.version, "size": table.num_rows, **({"parts": parts} if parts > 1 else {})}
        (log / "_last_checkpoint").write_text(json.dumps(last))
        if drop_commits:
            for number in range(self.version + 1):
                (log / f"{number:020d}.json").unlink(missing_ok=True)
        self._check()

    # -- writing -------------------------------------------------------------------------------------
    def _rewrite(self, operation: str, change: Any) -> None:
        adds, removes = [], []
        for path in list(self.files):
            stable = self._live(path)
            changed = [change(self.rows[sid]) for sid in stable]
            if all(new is old for new, old in zip(changed, (self.rows[sid] for sid in stable))):
                continue
            kept = [(sid, row) for sid, row in zip(stable, changed) if row is not None]
            removes.append(self._remove(path))
            for sid, row in zip(stable, changed):
                if row is None:
                    del self.rows[sid]
            if kept:
                adds.append(self._new_file([row for _, row in kept], [sid for sid, _ in kept]))
        self._commit(operation, adds, removes)

    def _new_file(self, rows: list[dict[str, Any]], stable: list[int | None], *, data_change: bool = True) -> dict:
        """A data file of ``rows``; ``stable`` gives each copied row's id (None for a new row, which gets its
        default id: the file's ``baseRowId`` plus its position)."""
        base = self.high_water + 1
        self.high_water = base + len(rows) - 1
        ids = [sid if sid is not None else base + position for position, sid in enumerate(stable)]
        columns = {name: [row[name] for row in rows] for name in self.schema.names}
        data = pa.table(columns, schema=self.schema)
        if any(sid is not None for sid in stable):
            data = data.append_column(MATERIALIZED, pa.array(stable, pa.int64()))
        name = f"part-{len(os.listdir(self.path)):05d}-{uuid.uuid4()}.parquet"
        pq.write_table(data, self.path / name)
        for sid, row in zip(ids, rows):
            self.rows[sid] = dict(row)
        self.placed[name] = ids
        action = {
            "path": name,
            "partitionValues": {},
            "size": (self.path / name).stat().st_size,
            "modificationTime": int(time.time() * 1000),
            "dataChange": data_change,
            "baseRowId": base,
            "defaultRowCommitVersion": self.version + 1,
        }
        self.files[name] = action
        return action

    def _remove(self, path: str, *, data_change: bool = True, keep: bool = False) -> dict:
        """The ``remove`` of a live file (with its deletion vector, as the protocol pairs them); ``keep`` when the
        same file is added back at once with another vector."""
        action = self.files[path] if keep else self.files.pop(path)
        if not keep:
            self.placed.pop(path)
            self.deleted.pop(path, None)
        removed = {
            "path": path,
            "deletionTimestamp": int(time.time() * 1000),
            "dataChange": data_change,
            "extendedFileMetadata": True,
            "partitionValues": {},
            "size": action["size"],
            "baseRowId": action["baseRowId"],
            "defaultRowCommitVersion": action["defaultRowCommitVersion"],
        }
        if "deletionVector" in action:
            removed["deletionVector"] = action["deletionVector"]
        return removed

    def _live(self, path: str) -> list[int]:
        """The stable ids of a file's rows its deletion vector does not mark, in file order."""
        marked = self.deleted.get(path, set())
        return [sid for position, sid in enumerate(self.placed[path]) if position not in marked]

    def _vector(self, positions: list[int], in_file: bool) -> dict[str, Any]:
        """A deletion vector descriptor for ``positions``, its bitmap serialized as the protocol says (magic
        number, portable 64-bit RoaringBitmap): Z85 text in the log, or a vector file beside the data."""
        import pyroaring

        data = struct.pack("<I", 1681511377) + pyroaring.BitMap64(positions).serialize()
        descriptor = {"sizeInBytes": len(data), "cardinality": len(positions)}
        if not in_file:
            padded = data + b"\0" * (-len(data) % 4)
            return {"storageType": "i", "pathOrInlineDv": _z85(padded), **descriptor}
        identifier = uuid.uuid4()
        prefix = "dv"
        (self.path / prefix).mkdir(exist_ok=True)
        body = struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
        (self.path / prefix / f"deletion_vector_{identifier}.bin").write_bytes(b"\x01" + body)
        self.vectors_stored += 1
        return {"storageType": "u", "pathOrInlineDv": prefix + _z85(identifier.bytes), "offset": 1, **descriptor}

    def _commit(self, operation: str, adds: list[dict], removes: list[dict], head: list[dict] | None = None) -> None:
        self.version += 1
        lines = [
            {
                "commitInfo": {
                    "timestamp": int(time.time() * 1000),
                    "operation": operation,
                    "operationParameters": {},
                    "readVersion": self.version - 1,
                    "isBlindAppend": operation == "WRITE",
                }
            },
            *(head or []),
            {
                "domainMetadata": {
                    "domain": "delta.rowTracking",
                    "configuration": json.dumps({"rowIdHighWaterMark": self.high_water}),
                    "removed": False,
                }
            },
            *({"remove": action} for action in removes),
            *({"add": action} for action in adds),
        ]
        (self.path / "_delta_log" / f"{self.version:020d}.json").write_text("\n".join(map(json.dumps, lines)) + "\n")
        self._check()

    def _check(self) -> None:
        """delta-rs reads this version, and exactly the rows the writer holds."""
        from deltalake import DeltaTable, QueryBuilder

        table = DeltaTable(str(self.path))
        assert table.version() == self.version
        if "readerFeatures" in self.protocol:  # delta-rs's Arrow reader refuses them; its query engine reads them
            result = QueryBuilder().register("t", table).execute("SELECT * FROM t")
            # Asked for plain types: the engine's view types do not import into pyarrow before 16 (the floor lane).
            capsule = result.__arrow_c_stream__(self.schema.__arrow_c_schema__())
            rows = pa.RecordBatchReader._import_from_c_capsule(capsule).read_all().to_pylist()
        else:
            rows = table.to_pyarrow_table().to_pylist()
        read = sorted(map(_frozen, rows))
        assert read == sorted(map(_frozen, self.rows.values())), "delta-rs reads other rows than were written"


def _z85(data: bytes) -> str:
    return base64.b85encode(data).decode("ascii").translate(str.maketrans(_B85, _Z85))


def _frozen(row: dict[str, Any]) -> tuple:
    return tuple(sorted(row.items()))
