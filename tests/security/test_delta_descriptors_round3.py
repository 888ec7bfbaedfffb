"""Issue 34, attack 1 in full: a local Delta table's files are read through descriptors, delta-rs's reads too.

The other user (a real second uid) owns a shared folder holding a table. Round three checked every data file
without following a link, but delta-rs then opened the files again by path: here the other user puts the real file
back whenever this package opens it and swaps a link to the victim's private Parquet file in right after (forced
through a hook on `LocalTree.open_file`, the one place every such open goes through), so whatever opens the file by
path meets the link. On the code before, `convert`, both job modes and a mirror keyed by row ids copied the
victim's rows into the output; a deletion vector file linked out of the table was read through the link too.
Now every file is read from the descriptor this package opened: the victim's rows never arrive.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset
from streaming.storage.local_tree import LocalTree
from streaming.storage.url import UnsafePathError
from tests.cli.conftest import run_cli
from tests.incremental.row_tracked_table import TrackedTable
from tests.security.conftest import as_other_user, share_tree, shared_dir

#: Of one length, so the victim's file is as large as the data file the log describes (the attacker reads its
#: size with ``stat``) and a reader that follows the link finds a valid file.
SECRET = "victim's private row"
PUBLIC = "the table's own rows"


def _victim_file(tmp_path, like: str, rows: pa.Table | None = None) -> str:
    """A Parquet file only the victim may read, of the size of the data file ``like``: ``rows`` written as
    pyarrow writes, else a delta-rs table's file of the row ``SECRET``."""
    from deltalake import DeltaTable, write_deltalake

    private = str(tmp_path / "victim")
    os.makedirs(private, 0o711, exist_ok=True)
    path = os.path.join(private, "secret.parquet")
    if rows is None:
        write_deltalake(os.path.join(private, "own"), pa.table({"text": [SECRET]}))
        [written] = [uri.removeprefix("file://") for uri in DeltaTable(os.path.join(private, "own")).file_uris()]
        shutil.move(written, path)
    else:
        pq.write_table(rows, path)
    os.chmod(path, 0o600)
    assert os.path.getsize(path) == os.path.getsize(like)
    return path


@pytest.fixture
def swap_after_each_open(monkeypatch) -> Iterator[callable]:
    """Arm with (data file, victim's file): every time this package opens the data file, the other user has the
    real file in place for that open and a link to the victim's file in its place right after."""
    armed: dict[str, str] = {}
    real_open = LocalTree.open_file

    def swap(to_link: bool) -> None:
        data, secret = armed["data"], armed["secret"]
        stash, link = data + ".real", data + ".link"

        def act() -> None:
            if to_link and not os.path.islink(data):
                os.symlink(secret, link)
                os.rename(data, stash)
                os.rename(link, data)
            elif not to_link and os.path.islink(data):
                os.rename(stash, data)  # replaces the link

        as_other_user(act)

    def open_then_swap(self: LocalTree, relative: str) -> tuple[int, os.stat_result]:
        mine = armed and os.path.realpath(self.path(relative)) == os.path.realpath(armed["data"])
        if mine:
            swap(to_link=False)
        opened = real_open(self, relative)
        if mine:
            swap(to_link=True)
        return opened

    def arm(data: str, secret: str) -> None:
        armed.update(data=data, secret=secret)

    monkeypatch.setattr(LocalTree, "open_file", open_then_swap)
    yield arm


def _shared_table(tmp_path) -> tuple[str, str]:
    """A delta-rs table of one row in a folder the other user may write; returns (table, its data file)."""
    from deltalake import DeltaTable, write_deltalake

    table = os.path.join(shared_dir(str(tmp_path / "shared")), "events")
    write_deltalake(table, pa.table({"text": [PUBLIC]}))
    [data] = [uri.removeprefix("file://") for uri in DeltaTable(table).file_uris()]
    share_tree(table)
    return table, data


def _texts(out: str) -> list[str]:
    return sorted(sample["text"] for sample in LocalDataset(out))


def test_convert_reads_the_file_it_opened_not_a_link_swapped_in_after(tmp_path, swap_after_each_open):
    table, data = _shared_table(tmp_path)
    swap_after_each_open(data, _victim_file(tmp_path, data))
    out = str(tmp_path / "shared" / "out")
    code, _, err = run_cli("convert", table, out, "--engine", "pyarrow")
    assert code == 0, err
    assert _texts(out) == [PUBLIC]
    assert os.path.islink(data)  # the link was in place whenever anything else opened the file


@pytest.mark.parametrize("mode", ["append", "mirror"])
def test_the_incremental_job_reads_the_file_it_opened_not_a_link_swapped_in_after(tmp_path, mode, swap_after_each_open):
    from streaming.spark import incremental_to_mds

    table, data = _shared_table(tmp_path)
    swap_after_each_open(data, _victim_file(tmp_path, data))
    out = str(tmp_path / "shared" / "out")
    options = {"key": ["text"]} if mode == "mirror" else {}
    incremental_to_mds(table, out, mode=mode, progress=False, **options)
    assert _texts(out) == [PUBLIC]


def _tracked(tmp_path, *, deletion_vectors: bool) -> TrackedTable:
    table = TrackedTable(
        tmp_path / "shared" / "tracked",
        [{"id": i, "name": f"n{i}"} for i in range(4)],
        deletion_vectors=deletion_vectors,
    )
    shared_dir(str(tmp_path / "shared"))
    share_tree(str(table.path))
    return table


def test_a_mirror_keyed_by_row_ids_reads_the_file_it_opened_not_a_link_swapped_in_after(tmp_path, swap_after_each_open):
    from streaming.spark import incremental_to_mds

    table = _tracked(tmp_path, deletion_vectors=False)
    [data] = [str(path) for path in table.path.glob("*.parquet")]
    secret = pq.read_table(data).set_column(1, "name", pa.array([f"v{i}" for i in range(4)]))
    swap_after_each_open(data, _victim_file(tmp_path, data, secret))
    out = str(tmp_path / "shared" / "out")
    incremental_to_mds(str(table.path), out, mode="mirror", progress=False)  # keyed by the table's row ids
    assert sorted(sample["name"] for sample in LocalDataset(out)) == [f"n{i}" for i in range(4)]


@pytest.mark.parametrize("mode", ["append", "mirror"])
def test_a_deletion_vector_file_linked_out_of_a_shared_table_is_refused(tmp_path, mode):
    from streaming.spark import incremental_to_mds

    table = _tracked(tmp_path, deletion_vectors=True)
    table.mark_deleted({1}, in_file=True)
    share_tree(str(table.path))
    [vector] = [str(path) for path in table.path.rglob("deletion_vector_*.bin")]
    private = str(tmp_path / "victim")
    os.makedirs(private, 0o711)
    secret = os.path.join(private, "vector.bin")
    shutil.move(vector, secret)  # the victim's own copy, only they may read it
    os.chmod(secret, 0o600)
    as_other_user(lambda: os.symlink(secret, vector))
    out = str(tmp_path / "shared" / "out")
    options = {"key": ["id"]} if mode == "mirror" else {}
    with pytest.raises(UnsafePathError, match=os.path.basename(vector)):
        incremental_to_mds(str(table.path), out, mode=mode, progress=False, **options)
    assert not os.path.exists(os.path.join(out, "index.json"))


# -- what the reader now does itself: column mapping ----------------------------------------------------------
def _column_mapped_table(path: str) -> pa.Table:
    """A table as Databricks writes one after a rename (``delta.columnMapping.mode`` ``name``): its files hold
    the physical names, nested ones too, and only the schema maps them to the logical names."""
    os.makedirs(os.path.join(path, "_delta_log"))
    physical = pa.table(
        {
            "col-a1": pa.array([1, 2], pa.int64()),
            "col-b2": pa.array([{"col-c3": "x"}, {"col-c3": None}], pa.struct([("col-c3", pa.string())])),
        }
    )
    name = f"part-00000-{uuid.uuid4()}.parquet"
    pq.write_table(physical, os.path.join(path, name))

    def field(logical: str, number: int, kind: object) -> dict:
        metadata = {
            "delta.columnMapping.id": number,
            "delta.columnMapping.physicalName": f"col-{'abc'[number - 1]}{number}",
        }
        return {"name": logical, "type": kind, "nullable": True, "metadata": metadata}

    inner = {"type": "struct", "fields": [field("city", 3, "string")]}
    schema = {"type": "struct", "fields": [field("id", 1, "long"), field("address", 2, inner)]}
    actions = [
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"},
                "createdTime": 0,
            }
        },
        {
            "add": {
                "path": name,
                "partitionValues": {},
                "size": os.path.getsize(os.path.join(path, name)),
                "modificationTime": 0,
                "dataChange": True,
            }
        },
    ]
    with open(os.path.join(path, "_delta_log", f"{0:020d}.json"), "w") as log:
        log.write("\n".join(json.dumps(action) for action in actions) + "\n")
    return pa.table({"id": [1, 2], "address": pa.array([{"city": "x"}, {"city": None}])})


def test_a_column_mapped_table_read_by_descriptor_has_its_logical_names(tmp_path):
    from deltalake import DeltaTable, QueryBuilder

    table = str(tmp_path / "mapped")
    expected = _column_mapped_table(table)
    # delta-rs's query engine (an independent reader) agrees with what the table should hold
    oracle = QueryBuilder().register("t", DeltaTable(table)).execute("SELECT id, address FROM t").read_all()
    assert pa.table(oracle).to_pylist() == expected.to_pylist()
    out = str(tmp_path / "out")
    code, _, err = run_cli("convert", table, out, "--engine", "pyarrow")
    assert code == 0, err
    assert [(s["id"], s["address"]) for s in LocalDataset(out)] == [
        (1, {"city": "x"}),
        (2, {"city": None}),
    ]


def test_the_change_data_feed_is_read_from_the_files_opened_not_a_link_swapped_in_after(tmp_path, swap_after_each_open):
    from deltalake import DeltaTable, write_deltalake

    from streaming.spark import incremental_to_mds

    table = os.path.join(shared_dir(str(tmp_path / "shared")), "events")
    write_deltalake(table, pa.table({"text": ["first"]}), configuration={"delta.enableChangeDataFeed": "true"})
    out = str(tmp_path / "shared" / "out")
    incremental_to_mds(table, out, progress=False)
    before = set(DeltaTable(table).file_uris())
    write_deltalake(table, pa.table({"text": [PUBLIC]}), mode="append")
    [data] = [uri.removeprefix("file://") for uri in set(DeltaTable(table).file_uris()) - before]
    share_tree(table)
    swap_after_each_open(data, _victim_file(tmp_path, data))
    run = incremental_to_mds(table, out, progress=False)
    assert run.method == "change_data_feed"
    assert _texts(out) == sorted(["first", PUBLIC])
