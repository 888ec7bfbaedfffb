"""Issue 34, attack 4 in full: a Delta checkpoint bomb is refused before it is decoded.

A checkpoint of 2M identical ``add`` actions is a few KiB of Parquet; on the code before issue 34, `convert`, the
incremental job and `dataframe_to_mds` of the path grew by hundreds of MiB inside delta-rs, which decoded it whole
to open the table. The package now replays the log itself (`streaming.delta.log_replay`), reading each checkpoint
file's footer first: a file declaring more actions than bytes is refused naming the table and the file, the
process barely growing (measured in a fresh interpreter).
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming.delta.snapshot import Snapshot
from streaming.storage.parquet_bounds import ROW_ALLOWANCE, ParquetBoundsError
from tests.security.test_bombs_round3 import GROWTH_LIMIT, _growth_in_fresh_process


def _table_with_checkpoint(tmp_path, rows: int = 20) -> tuple[str, str]:
    """A delta-rs table of a few commits and a checkpoint; returns (table, the checkpoint's path)."""
    from deltalake import DeltaTable, write_deltalake

    table = str(tmp_path / "events")
    for start in range(0, rows, 5):
        write_deltalake(table, pa.table({"id": list(range(start, start + 5))}), mode="append")
    DeltaTable(table).create_checkpoint()
    [name] = [n for n in os.listdir(os.path.join(table, "_delta_log")) if n.endswith(".checkpoint.parquet")]
    return table, os.path.join(table, "_delta_log", name)


def _bomb(path: str, copies: int = 2_000_000) -> None:
    """Append ``copies`` copies of the checkpoint's first ``add`` action to it (a few KiB of zstd Parquet)."""
    actions = pq.read_table(path)
    adds = actions.filter(actions.column("add").is_valid())
    pq.write_table(pa.concat_tables([actions, adds.take(pa.array([0] * copies))]), path, compression="zstd")


@pytest.mark.parametrize(
    "call",
    [
        "from tests.cli.conftest import run_cli\n    code, _, err = run_cli('convert', TABLE, OUT, '--engine', "
        "'pyarrow')\n    assert code == 1\n    raise RuntimeError(err)",
        "incremental_to_mds(TABLE, OUT, progress=False)",
        "incremental_to_mds(TABLE, OUT, mode='mirror', key=['id'], progress=False)",
    ],
    ids=["convert", "append", "mirror"],
)
def test_a_delta_checkpoint_bomb_is_refused_before_it_is_decoded(tmp_path, call):
    table, checkpoint = _table_with_checkpoint(tmp_path)
    _bomb(checkpoint)
    assert os.path.getsize(checkpoint) < 1 << 20
    out = str(tmp_path / "out")
    growth, outcome = _growth_in_fresh_process(call.replace("TABLE", repr(table)).replace("OUT", repr(out)))
    assert growth < GROWTH_LIMIT, f"opening the table grew the process by {growth >> 20} MiB"
    assert "ParquetBoundsError" in outcome and os.path.basename(checkpoint) in outcome and table in outcome, outcome
    assert not os.path.exists(os.path.join(out, "index.json"))


def test_a_sidecar_bomb_of_a_v2_checkpoint_is_refused_before_it_is_decoded(tmp_path):
    """A V2 checkpoint's actions may sit in the sidecar files it names: a sidecar of 2M identical ``add`` actions
    is refused by its footer, naming the table and the sidecar."""
    table, checkpoint = _table_with_checkpoint(tmp_path)
    log = os.path.dirname(checkpoint)
    actions = pq.read_table(checkpoint)
    os.makedirs(os.path.join(log, "_sidecars"))
    sidecar = os.path.join(log, "_sidecars", "bomb.parquet")
    adds = actions.filter(actions.column("add").is_valid()).select(["add"])
    pq.write_table(adds.take(pa.array([0] * 2_000_000)), sidecar, compression="zstd")
    assert os.path.getsize(sidecar) < 1 << 20
    first = os.path.join(log, f"{0:020d}.json")
    with open(first) as file:  # the table's metaData and protocol, as its first commit wrote them
        kept = [line for line in file.read().splitlines() if '"metaData"' in line or '"protocol"' in line]
    v2 = os.path.basename(checkpoint).replace(
        ".checkpoint.parquet", f".checkpoint.{'0' * 8}-{'1' * 4}-{'2' * 4}-{'3' * 4}-{'4' * 12}.json"
    )
    with open(os.path.join(log, v2), "w") as file:
        sidecar_action = {"sidecar": {"path": "bomb.parquet", "sizeInBytes": os.path.getsize(sidecar)}}
        file.write("\n".join([*kept, json.dumps(sidecar_action)]) + "\n")
    os.remove(checkpoint)
    with pytest.raises(ParquetBoundsError, match="bomb.parquet") as info:
        Snapshot.open(table)
    assert table in str(info.value) and "more than one a byte" in str(info.value)


def test_honest_checkpoints_hold_fewer_actions_than_bytes(tmp_path):
    """The bound refuses nothing a Delta writer writes: delta-rs's checkpoint of many small files."""
    from deltalake import DeltaTable, write_deltalake

    table = str(tmp_path / "many")
    for start in range(0, 600, 3):
        write_deltalake(table, pa.table({"id": [start, start + 1, start + 2]}), mode="append")
    DeltaTable(table).create_checkpoint()
    assert Snapshot.open(table).log.checkpoint == 199
    log = os.path.join(table, "_delta_log")
    checkpoints = [os.path.join(log, n) for n in os.listdir(log) if n.endswith(".checkpoint.parquet")]
    assert len(checkpoints) >= 2
    for path in checkpoints:
        rows = pq.ParquetFile(path).metadata.num_rows
        assert rows > 100 and rows <= os.path.getsize(path) + ROW_ALLOWANCE
    assert DeltaTable(table).version() == 199
