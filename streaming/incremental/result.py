"""What one run of the incremental job did: its result, and the record a run leaves beside its shards."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

#: The run's record, written into its increment folder beside its shards.
RECORD_BASENAME = "increment.json"


@dataclass(frozen=True)
class IncrementResult:
    """What one run of ``incremental_to_mds`` did.

    Attributes:
        path: the dataset root.
        table: the table name or Delta path, as given.
        previous_version: the table version the dataset held before the run (None: there was no dataset).
        version: the table version the dataset holds now.
        method: how the new rows were found, one of `streaming.incremental.change.METHODS`.
        samples: rows appended by this run.
        shards: shards appended by this run.
        unapplied_changes: rows of ``previous_version`` that ``version`` no longer has (deleted rows, old
            values of updated rows), which the append-only dataset keeps.
        ignored_columns: table columns the dataset does not hold (added to the table after its first run).
        mode: ``"append"`` or ``"mirror"`` (`streaming.incremental.mirror`).
        removed: rows a mirror run removed (deleted rows and old values of updated rows).
        shards_rewritten: shards a mirror run rewrote without those rows (copy on write).
        bytes_read: bytes of shard files a mirror run read to rewrite them.
        bytes_written: bytes of shard files a mirror run wrote in their place.
    """

    path: str
    table: str
    previous_version: int | None
    version: int
    method: str
    samples: int
    shards: int
    unapplied_changes: int
    ignored_columns: list[str] = field(default_factory=list)
    mode: str = "append"
    removed: int = 0
    shards_rewritten: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_record(result: IncrementResult, run: str, reader: str, **extra: Any) -> dict[str, Any]:
    """The conversion record of a run: its result, its run id, the table version and reader, and ``extra``."""
    return {
        **result.to_json(),
        "run": run,
        **extra,
        "source": {"kind": "delta", "name": result.table, "version": result.version, "reader": reader},
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
