"""`convert` without Spark: every input kind, any store, the type rules of dataframe_to_mds, bounded memory."""

from __future__ import annotations

import datetime
import decimal
import inspect
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset
from streaming.convert.arrow_inputs import JSON_BLOCK_BYTES
from streaming.storage.dataset_root import DatasetRoot
from tests.cli.conftest import run_cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _as_from_a_shell(monkeypatch):
    """Run the command line as a shell runs it: in a fresh process no Spark session is active, so ``--engine
    auto`` picks pyarrow, even when an earlier test of this run left the suite's session active in-process."""
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))


def _parquet_stores_float16() -> bool:
    """Whether this pyarrow writes float16 to Parquet (from 15 on; Databricks Runtime 14.3's pyarrow 8 cannot, so no
    Parquet file written there holds one)."""
    try:
        pq.write_table(pa.table({"half": pa.array(np.zeros(1, np.float16))}), pa.BufferOutputStream())
    except pa.ArrowNotImplementedError:
        return False
    return True


PARQUET_FLOAT16 = _parquet_stores_float16()


def _table(rows: int = 500) -> pa.Table:
    half = {"half": pa.array(np.arange(rows, dtype=np.float16))} if PARQUET_FLOAT16 else {}
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "text": [f"row {i}" for i in range(rows)],
            "small": pa.array([i % 100 for i in range(rows)], pa.int8()),
            **half,
            "when": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5)] * rows, pa.timestamp("ns")),
            "day": pa.array([datetime.date(2024, 1, 2)] * rows, pa.date64()),
            "price": [decimal.Decimal("12.50")] * rows,
            "vector": [[float(i), 1.5] for i in range(rows)],
            "meta": [{"k": i, "tags": ["a", None]} for i in range(rows)],
            "label": pa.array(["cat", "dog"] * (rows // 2)).dictionary_encode(),
            "flag": [i % 2 == 0 for i in range(rows)],
            "raw": [bytes([i % 256]) * 3 for i in range(rows)],
        }
    )


EXPECTED = {
    "id": "int64",
    "text": "str",
    "small": "int8",
    "half": "float32",
    "when": "int64",
    "day": "int32",
    "price": "str_decimal",
    "vector": "ndarray:float64",
    "meta": "json",
    "label": "str",
    "flag": "uint8",
    "raw": "bytes",
}
if not PARQUET_FLOAT16:
    del EXPECTED["half"]


def _check_rows(root: str, rows: int) -> None:
    ds = LocalDataset(root)
    assert len(ds) == rows
    first, last = ds[0], ds[rows - 1]
    assert first["id"] == 0 and last["id"] == rows - 1 and last["text"] == f"row {rows - 1}"
    assert first["when"] == 1704164645000000  # microseconds, as Spark stores TimestampType
    assert first["day"] == 19724  # days since the epoch, as Spark's DateType
    assert first["price"] == decimal.Decimal("12.50")
    assert list(last["vector"]) == [rows - 1, 1.5]
    assert first["meta"] == {"k": 0, "tags": ["a", None]}
    assert (first["label"], ds[1]["label"], first["flag"], ds[1]["flag"]) == ("cat", "dog", 1, 0)


def test_convert_parquet_to_each_store(store, tmp_path):
    source = str(tmp_path / "in.parquet")
    pq.write_table(_table(), source, row_group_size=50)
    out = store("ds")
    code, doc, _ = run_cli(
        "convert", source, out, "--json", "--workers", "2", "--size-limit", "8kb", "--hashes", "sha1"
    )
    assert code == 0, doc
    assert doc["columns"] == EXPECTED and doc["samples"] == 500 and doc["engine"] == "pyarrow"
    assert run_cli("verify", out)[0] == 0
    local = out
    if out.startswith("s3://"):
        local = str(tmp_path / "copy")
        assert run_cli("cp", out, local, "--quiet")[0] == 0
    _check_rows(local, 500)
    record = json.loads(DatasetRoot(out).read_bytes("mds_conversion.json"))
    assert record["latest"]["source"]["kind"] == "parquet" and record["latest"]["samples"] == 500
    # The commit protocol of dataframe_to_mds: refuse a non-empty destination, append with one index update.
    code, _, err = run_cli("convert", source, out)
    assert code == 1 and "--mode overwrite" in err and "mode='" not in err
    assert run_cli("convert", source, out, "--mode", "append", "--quiet")[0] == 0
    assert run_cli("inspect", out, "--json", "--samples", "0")[1]["samples"] == 1000


def test_convert_a_parquet_folder_on_s3(store, tmp_path):
    folder = store("input")
    for part in range(3):
        path = str(tmp_path / f"part-{part}.parquet")
        pq.write_table(_table(100).slice(0, 100), path)
        DatasetRoot(folder).storage.put(path, DatasetRoot(folder).child(f"part-{part}.parquet"))
    DatasetRoot(folder).write_bytes("_SUCCESS", b"")
    out = str(tmp_path / "ds")
    code, doc, _ = run_cli("convert", folder, out, "--json", "--columns", "id,text:str", "--compression", "none")
    assert code == 0 and doc["columns"] == {"id": "int64", "text": "str"} and doc["samples"] == 300
    assert [LocalDataset(out)[i]["id"] for i in (0, 100, 299)] == [0, 0, 99]


def test_convert_json_lines_csv_and_hf(tmp_path):
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"a": i, "b": f"x{i}", "c": [i, i + 1]}) + "\n" for i in range(200)))
    code, doc, _ = run_cli("convert", str(jsonl), str(tmp_path / "j"), "--json")
    assert code == 0 and doc["columns"] == {"a": "int64", "b": "str", "c": "ndarray:int64"}
    assert LocalDataset(str(tmp_path / "j"))[199]["b"] == "x199"

    csv = tmp_path / "in.csv"
    csv.write_text("a,b\n" + "".join(f"{i},{i / 2}\n" for i in range(200)))
    code, doc, _ = run_cli("convert", str(csv), str(tmp_path / "c"), "--json", "--columns", "a:int32,b")
    assert code == 0 and doc["columns"] == {"a": "int32", "b": "float64"}
    assert LocalDataset(str(tmp_path / "c"))[3]["b"] == 1.5

    hf = tmp_path / "hf"  # the layout of datasets' save_to_disk: Arrow stream files listed in state.json
    hf.mkdir()
    table = pa.table({"text": [f"t{i}" for i in range(120)], "label": pa.array(range(120), pa.int64())})
    for number, piece in enumerate((table.slice(0, 60), table.slice(60))):
        with pa.OSFile(str(hf / f"data-0000{number}-of-00002.arrow"), "wb") as sink:
            with pa.ipc.new_stream(sink, piece.schema) as writer:
                writer.write_table(piece, max_chunksize=16)
    (hf / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": f"data-0000{n}-of-00002.arrow"} for n in (0, 1)]})
    )
    (hf / "dataset_info.json").write_text("{}")
    code, doc, _ = run_cli("convert", str(hf), str(tmp_path / "h"), "--json", "--workers", "2")
    assert code == 0 and doc["source_kind"] == "hf" and doc["samples"] == 120
    assert [LocalDataset(str(tmp_path / "h"))[i]["text"] for i in (0, 60, 119)] == ["t0", "t60", "t119"]

    splits = tmp_path / "hf_dict"  # a DatasetDict: one saved dataset per split, listed in dataset_dict.json
    splits.mkdir()
    (splits / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    os.rename(hf, splits / "train")
    code, _, err = run_cli("convert", str(splits), str(tmp_path / "s"))
    assert code == 2 and "--split" in err and "train" in err
    code, doc, _ = run_cli("convert", str(splits), str(tmp_path / "s"), "--split", "train", "--json")
    assert code == 0 and doc["samples"] == 120


def test_convert_json_lines_of_several_blocks(tmp_path):
    """A JSON Lines file several of the reader's blocks long (pyarrow before 19 parses it a block at a time)."""
    rows = 60_000
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"a": i, "b": f"x{i}", "c": [i, i + 1]}) + "\n" for i in range(rows)))
    assert jsonl.stat().st_size > 2 * JSON_BLOCK_BYTES
    code, doc, err = run_cli("convert", str(jsonl), str(tmp_path / "j"), "--json")
    assert code == 0, err
    assert doc["samples"] == rows and doc["columns"] == {"a": "int64", "b": "str", "c": "ndarray:int64"}
    dataset = LocalDataset(str(tmp_path / "j"))
    assert [dataset[i]["b"] for i in (0, rows // 2, rows - 1)] == ["x0", f"x{rows // 2}", f"x{rows - 1}"]
    assert list(dataset[rows - 1]["c"]) == [rows - 1, rows]


def test_convert_a_delta_path(tmp_path):
    from deltalake import write_deltalake

    table = pa.table({"text": [f"t{i}" for i in range(120)], "label": pa.array(range(120), pa.int64())})
    write_deltalake(str(tmp_path / "delta"), table)
    write_deltalake(str(tmp_path / "delta"), table.slice(0, 10), mode="append")
    code, doc, _ = run_cli("convert", str(tmp_path / "delta"), str(tmp_path / "d"), "--json")
    assert code == 0 and doc["source_kind"] == "delta" and doc["samples"] == 130
    record = json.loads((tmp_path / "d" / "mds_conversion.json").read_text())
    assert record["latest"]["source"]["version"] == 1


def test_convert_reads_a_delta_table_with_deletion_vectors(tmp_path):
    from tests.incremental.row_tracked_table import TrackedTable

    table = TrackedTable(tmp_path / "t", [{"id": i, "name": f"n{i}"} for i in range(20)], deletion_vectors=True)
    table.mark_deleted({3, 4}, in_file=False)
    table.mark_deleted({9}, in_file=True)
    code, doc, err = run_cli("convert", str(table.path), str(tmp_path / "out"), "--json")
    assert code == 0 and doc["samples"] == 17, err
    held = sorted((int(s["id"]), s["name"]) for s in LocalDataset(str(tmp_path / "out")))
    assert held == sorted((row["id"], row["name"]) for row in table.rows.values())


def test_convert_usage_errors_say_what_to_do(tmp_path):
    source = str(tmp_path / "in.parquet")
    pq.write_table(_table(10), source)
    code, _, err = run_cli("convert", source, str(tmp_path / "a"), "--columns", "id:str")
    assert code == 1 and "valid choices: int64" in err
    code, _, err = run_cli("convert", source, str(tmp_path / "b"), "--compression", "lzma")
    assert code == 2 and "Valid algorithms" in err
    code, _, err = run_cli("convert", "main.sales.orders", str(tmp_path / "c"))
    assert code == 2 and "--spark" in err
    assert not os.path.exists(tmp_path / "a") or DatasetRoot(str(tmp_path / "a")).size("index.json") is None


def test_the_spark_face_of_the_rules_matches_pysparks_own_arrow_mapping():
    """Every Spark type gets the encoding and choices that the one set of rules gives the Arrow type pyspark itself
    hands a task for it (pyspark's ``to_arrow_type`` is the oracle of `streaming.spark.schema.arrow_type`)."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_type

    from streaming.convert import type_rules as arrow_schema
    from streaming.spark import schema

    spark_types = [
        T.ByteType(),
        T.ShortType(),
        T.IntegerType(),
        T.LongType(),
        T.FloatType(),
        T.DoubleType(),
        T.BooleanType(),
        T.DecimalType(38, 9),
        T.StringType(),
        T.BinaryType(),
        T.DateType(),
        T.TimestampType(),
        T.TimestampNTZType(),
        T.DayTimeIntervalType(),
        T.ArrayType(T.IntegerType()),
        T.ArrayType(T.ArrayType(T.FloatType(), False)),
        T.ArrayType(T.StringType()),
        T.MapType(T.StringType(), T.LongType()),
        T.StructType([T.StructField("a", T.LongType())]),
        VectorUDT(),  # crosses as its SQL struct, which the rules know as an ML vector
    ]
    assert arrow_schema.INTEGER_ENCODINGS == schema.INTEGER_ENCODINGS
    assert arrow_schema.BINARY_ENCODINGS == schema.BINARY_ENCODINGS
    # pyspark 4 takes the session's time zone; 3.5 (Databricks Runtime 14.3 to 16.4) always gives UTC.
    zone = {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_type).parameters else {}
    for spark_type in spark_types:
        arrow_type = to_arrow_type(spark_type, **zone)
        assert arrow_schema.default_encoding(arrow_type, "c") == schema.default_encoding(spark_type, "c"), spark_type
        assert arrow_schema.allowed_encodings(arrow_type, "c") == schema.allowed_encodings(spark_type, "c"), spark_type
        assert schema.arrow_type(spark_type) == arrow_type or (str(schema.arrow_type(spark_type)) == str(arrow_type)), (
            spark_type
        )


@pytest.mark.slow  # writes and converts 1.3 GB: about 11 s
def test_convert_stays_within_a_memory_limit_half_the_input(tmp_path):
    """A Parquet file twice the size of the address-space limit of the converting processes converts."""
    limit = 640 << 20
    source = tmp_path / "big.parquet"
    rng = np.random.default_rng(0)
    groups = 2 * limit // (16 << 20) + 2
    rows = 256
    with pq.ParquetWriter(str(source), pa.schema([("id", pa.int64()), ("payload", pa.binary())])) as writer:
        for group in range(groups):  # 16 MiB of incompressible bytes per row group
            payloads = [rng.bytes(64 << 10) for _ in range(rows)]
            writer.write_table(pa.table({"id": np.arange(group * rows, (group + 1) * rows), "payload": payloads}))
    row = groups * rows
    size = source.stat().st_size
    assert size >= 2 * limit
    script = textwrap.dedent(
        f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
        from streaming.cli import main
        sys.exit(main(["convert", {str(source)!r}, {str(tmp_path / "out")!r}, "--compression", "none",
                       "--size-limit", "16mb", "--workers", "2", "--quiet", "--json"]))
        """
    )
    # RLIMIT_AS limits address space, which thread pools and allocators reserve far beyond what they use;
    # these settings keep the reservations small so that the limit measures the memory the conversion needs.
    # A writer holds up to 2 x threads finished shards while its threads store them (all of them when storing is
    # slow, as on a loaded machine), so the shards are 16 MB: the worst case then fits whatever the timing.
    env = {
        **os.environ,
        "PYTHONPATH": REPO,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "ARROW_DEFAULT_MEMORY_POOL": "system",
        "MALLOC_ARENA_MAX": "2",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["samples"] == row and summary["bytes"] > size * 0.9
    ds = LocalDataset(str(tmp_path / "out"))
    assert ds[row - 1]["id"] == row - 1 and len(ds[row - 1]["payload"]) == 64 << 10


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        *(
            [name, "--help"]
            for name in (
                "convert",
                "inspect",
                "verify",
                "rebuild-index",
                "merge-index",
                "cp",
                "sync",
                "vacuum",
                "simulate",
            )
        ),
    ],
)
def test_help_teaches_by_example(argv):
    code, text, _ = run_cli(*argv)
    assert code == 0 and "examples:" in text and "mds-streaming " + (argv[0] if len(argv) > 1 else "") in text


def test_entry_point_runs_as_a_module(tmp_path):
    source = str(tmp_path / "in.parquet")
    pq.write_table(_table(20), source)
    env = {**os.environ, "PYTHONPATH": REPO}
    done = subprocess.run(
        [sys.executable, "-m", "streaming", "convert", source, str(tmp_path / "ds"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["samples"] == 20
    done = subprocess.run([sys.executable, "-m", "streaming", "verify"], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "usage:" in done.stderr
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, streaming, streaming.cli; print(sorted(m for m in "
            "('pyarrow', 'matplotlib', 'pyspark', 'torch', 'streaming.cli') if m in sys.modules))",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "['streaming.cli']", done.stderr
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest's own dependency
        import tomli as tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as stream:
        assert tomllib.load(stream)["project"]["scripts"]["mds-streaming"] == "streaming.cli:main"
