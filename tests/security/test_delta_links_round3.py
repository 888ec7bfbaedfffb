"""Issue 34, attack 1: a co-tenant's Delta table whose data file is a link to a file only the victim can read.

The other user (a real second uid) replaces the data file of a table in a shared folder with a symlink to the
victim's private Parquet file (of the size the log states). On the code before issue 34, ``mds-streaming
convert`` and ``incremental_to_mds`` copied the victim's rows into a dataset the attacker reads; now each
refuses the link naming it, before any row is read. A link swapped in after that check:
`test_delta_descriptors_round3.py`.
"""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from streaming.storage.url import UnsafePathError
from tests.cli.conftest import run_cli
from tests.security.conftest import as_other_user, shared_dir

SECRET = "victim's private row"


def _linked_table(tmp_path) -> tuple[str, str]:
    """A table in a shared folder whose one data file the other user replaced by a link to the victim's copy."""
    from deltalake import DeltaTable, write_deltalake

    shared = shared_dir(str(tmp_path / "shared"))
    table = os.path.join(shared, "events")
    write_deltalake(table, pa.table({"text": [SECRET]}))
    [data] = [uri.removeprefix("file://") for uri in DeltaTable(table).file_uris()]
    private = str(tmp_path / "victim")
    os.makedirs(private, 0o711)
    secret = os.path.join(private, "secret.parquet")
    shutil.move(data, secret)
    os.chmod(secret, 0o600)  # only the victim may read it
    for folder, _, _ in os.walk(table):
        os.chmod(folder, 0o777)

    def plant() -> None:
        os.symlink(secret, data)

    as_other_user(plant)
    assert os.lstat(data).st_uid != os.getuid() and os.path.islink(data)
    return table, data


def test_convert_refuses_a_data_file_linked_out_of_a_shared_table(tmp_path):
    table, data = _linked_table(tmp_path)
    out = str(tmp_path / "shared" / "out")
    code, _, err = run_cli("convert", table, out, "--engine", "pyarrow")  # delta-rs; Spark reads it itself
    assert code == 1 and "UnsafePathError" in err and os.path.basename(data) in err, err
    assert not os.path.exists(os.path.join(out, "index.json"))


@pytest.mark.parametrize("mode", ["append", "mirror"])
def test_the_incremental_job_refuses_a_data_file_linked_out_of_a_shared_table(tmp_path, mode):
    from streaming.spark import incremental_to_mds

    table, data = _linked_table(tmp_path)
    out = str(tmp_path / "shared" / "out")
    options = {"key": ["text"]} if mode == "mirror" else {}
    with pytest.raises(UnsafePathError, match=os.path.basename(data)):
        incremental_to_mds(table, out, mode=mode, progress=False, **options)
    assert not os.path.exists(os.path.join(out, "index.json"))
