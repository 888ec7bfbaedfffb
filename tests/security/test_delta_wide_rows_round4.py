"""Round four (issue 47), attack 2: a Delta checkpoint of a few wide rows, and the bounds on healthy tables.

A checkpoint whose 100 extra ``add`` rows carry 4 MiB paths is ~32 KB of zstd Parquet and passes a bound on rows;
on the code before issue 47, ``mds-streaming convert`` then grew by ~2 GiB inside delta-rs and died of a pyo3
panic. Now the decoded bytes its footer declares (and a dictionary page's longest entry times its rows) are
checked against what such actions take before the log's replay decodes it, and the file is refused by name. Every
bound compares a checkpoint with itself: a healthy history (appends, MERGE, OPTIMIZE, VACUUM, a checkpoint every
10 versions) is never refused at any version, where before the row-id listing compared an old checkpoint with the
files the table holds after VACUUM.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming.delta.snapshot import Snapshot
from streaming.storage.parquet_bounds import ParquetBoundsError, check_checkpoint
from tests.security.test_bombs_round3 import GROWTH_LIMIT, _growth_in_fresh_process

WIDE = 4 << 20  # bytes of each crafted path


def _table_with_checkpoint(tmp_path) -> tuple[str, str]:
    from deltalake import DeltaTable, write_deltalake

    table = str(tmp_path / "events")
    for start in range(0, 20, 5):
        write_deltalake(table, pa.table({"id": list(range(start, start + 5))}), mode="append")
    DeltaTable(table).create_checkpoint()
    [name] = [n for n in os.listdir(os.path.join(table, "_delta_log")) if n.endswith(".checkpoint.parquet")]
    return table, os.path.join(table, "_delta_log", name)


def _widen(path: str, rows: int = 100, same_path: bool = False, **options) -> None:
    """Add ``rows`` copies of the checkpoint's first ``add`` action, each naming a path of `WIDE` bytes, and make
    ``_last_checkpoint`` say so (the bound on rows and the hint then both pass)."""
    actions = pq.read_table(path)
    copies = actions.filter(actions.column("add").is_valid()).take(pa.array([0] * rows))
    add = copies.column("add").combine_chunks()
    paths = pa.array(["p" * WIDE + ("" if same_path else f"-{n}") for n in range(rows)], add.type.field("path").type)
    fields = [add.type.field(index) for index in range(add.type.num_fields)]
    children = [paths if field.name == "path" else add.field(field.name) for field in fields]
    wide = copies.set_column(
        copies.schema.get_field_index("add"), "add", pa.StructArray.from_arrays(children, fields=fields)
    )
    pq.write_table(pa.concat_tables([actions, wide]), path, compression="zstd", **options)
    hint = os.path.join(os.path.dirname(path), "_last_checkpoint")  # the attacker writes the log: the hint agrees
    with open(hint) as file:
        declared = json.load(file)
    with open(hint, "w") as file:
        json.dump({**declared, "size": actions.num_rows + rows, "sizeInBytes": os.path.getsize(path)}, file)


def test_a_checkpoint_of_a_few_wide_rows_is_refused_before_delta_rs_decodes_it(tmp_path):
    table, checkpoint = _table_with_checkpoint(tmp_path)
    _widen(checkpoint)
    assert os.path.getsize(checkpoint) < 64 << 10, os.path.getsize(checkpoint)  # 400 MiB of paths in ~32 KB
    out = str(tmp_path / "out")
    call = (
        "from tests.cli.conftest import run_cli\n    code, _, err = run_cli('convert', TABLE, OUT)\n"
        "    assert code == 1\n    raise RuntimeError(err)"
    )
    growth, outcome = _growth_in_fresh_process(call.replace("TABLE", repr(table)).replace("OUT", repr(out)))
    assert growth < GROWTH_LIMIT, f"opening the table grew the process by {growth >> 20} MiB"
    assert "ParquetBoundsError" in outcome and os.path.basename(checkpoint) in outcome and table in outcome, outcome
    assert "add.path" in outcome, outcome
    assert not os.path.exists(os.path.join(out, "index.json"))


def test_one_wide_dictionary_entry_repeated_by_every_row_is_refused(tmp_path):
    """The same 4 MiB path in every extra row, kept in one dictionary entry: the footer declares ~4 MiB, the rows
    decode to 400 MiB. The dictionary page's longest entry times the rows gives it away."""
    table, checkpoint = _table_with_checkpoint(tmp_path)
    _widen(checkpoint, same_path=True, dictionary_pagesize_limit=64 << 20)
    footer = pq.ParquetFile(checkpoint).metadata
    declared = sum(
        footer.row_group(g).column(c).total_uncompressed_size
        for g in range(footer.num_row_groups)
        for c in range(footer.num_columns)
    )
    assert declared < 3 * WIDE  # what the footer alone says
    with pytest.raises(ParquetBoundsError, match="add.path") as info:
        Snapshot.open(table)
    assert os.path.basename(checkpoint) in str(info.value) and table in str(info.value)


def test_honest_checkpoints_with_dictionaries_and_long_statistics_pass(tmp_path):
    """delta-rs's own checkpoint of a table with partitions (dictionary-encoded values) and 40 columns of
    statistics, and the same rows rewritten with dictionaries everywhere, pass the bound."""
    from deltalake import DeltaTable, write_deltalake

    table = str(tmp_path / "wide")
    columns = {f"column_{n:02d}_with_a_long_name": [f"value {n} " * 4] * 3 for n in range(40)}
    for part in range(30):
        write_deltalake(
            table,
            pa.table({"day": [f"2026-01-{part % 28 + 1:02d}"] * 3, **columns}),
            mode="append",
            partition_by=["day"],
        )
    DeltaTable(table).create_checkpoint()
    Snapshot.open(table)
    [name] = [n for n in os.listdir(os.path.join(table, "_delta_log")) if n.endswith(".checkpoint.parquet")]
    path = os.path.join(table, "_delta_log", name)
    pq.write_table(pq.read_table(path), path, use_dictionary=True, compression="snappy")
    assert check_checkpoint(path, path, os.path.getsize(path)) == pq.ParquetFile(path).metadata.num_rows


def _healthy_history(path: str, job: Callable[[], object], first_run: int = 7) -> int:
    """A table as a scheduled job meets it: appends, MERGEs, OPTIMIZE compactions and VACUUMs with no retention,
    a checkpoint every 10 versions (delta-rs's own, at its commit). ``job`` runs once the newest version is
    ``first_run`` or later, then before every VACUUM (as a job scheduled between maintenance windows does) and at
    the end. Returns the newest version."""
    from deltalake import DeltaTable, write_deltalake

    def rows(start: int, count: int, tag: str) -> pa.Table:
        return pa.table({"id": list(range(start, start + count)), "tag": [tag] * count})

    write_deltalake(path, rows(0, 5, "v0"), configuration={"delta.checkpointInterval": "10"})
    next_id, started = 5, False
    while DeltaTable(path).version() < 63:
        version = DeltaTable(path).version()
        step = version % 9
        if version >= first_run and not started:
            job()
            started = True
        table = DeltaTable(path)
        if step == 4:  # update two rows and insert one
            source = pa.table({"id": [1, 3, next_id], "tag": [f"m{version}"] * 3})
            (
                table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            next_id += 1
        elif step == 7:
            table.optimize.compact()
        elif step == 8:
            if started:
                job()
            table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        else:
            write_deltalake(path, rows(next_id, 3, f"a{version}"), mode="append")
            next_id += 3
    job()
    return DeltaTable(path).version()


def test_a_healthy_history_is_never_refused_at_any_version(tmp_path):
    from pyarrow.fs import LocalFileSystem, SubTreeFileSystem

    from streaming.delta.log_replay import replay
    from streaming.incremental.job import incremental_to_mds

    table, out = str(tmp_path / "history"), str(tmp_path / "mirror")
    runs = []

    def mirror() -> None:  # the scheduled job: first at version 7, last at the newest (63 or 64)
        runs.append(incremental_to_mds(table, out, mode="mirror", key=["id"], progress=False))

    newest = _healthy_history(table, mirror)
    log = os.listdir(os.path.join(table, "_delta_log"))
    assert newest >= 63 and sum(name.endswith(".checkpoint.parquet") for name in log) >= 6
    filesystem = SubTreeFileSystem(table, LocalFileSystem())

    def read_text(name: str) -> str | None:
        full = os.path.join(table, name)
        return open(full).read() if os.path.exists(full) else None

    for version in range(newest + 1):
        replay(filesystem, read_text, table, version)  # compared a vacuumed version's checkpoint with today's files
    assert len(runs) >= 7 and runs[-1].version == newest
