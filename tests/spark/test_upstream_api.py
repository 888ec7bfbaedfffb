"""MosaicML Streaming's `streaming.base.converters` API keeps working on top of `streaming.spark`."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal

import numpy as np
import pytest
from pyspark.sql import types as T

from streaming._extras import install_command
from streaming.base.converters import (
    SPARK_TO_MDS,
    dataframe_to_mds,
    dataframeToMDS,
    infer_dataframe_schema,
    is_json_compatible,
)
from streaming.base.util import merge_index
from tests.spark.helpers import files_under, load_index, read_samples


@pytest.fixture(scope="module")
def people(spark):
    schema = T.StructType(
        [
            T.StructField("id", T.StringType()),
            T.StructField("dept", T.StringType()),
            T.StructField(
                "properties",
                T.StructType([T.StructField("salary", T.IntegerType()), T.StructField("location", T.StringType())]),
            ),
        ]
    )
    rows = [
        ("36636", "Finance", (3000, "USA")),
        ("40288", "Finance", (5000, "IND")),
        ("42114", "Sales", (3900, "USA")),
        ("39192", "Marketing", (2500, "CAN")),
    ]
    return spark.createDataFrame(rows, schema).repartition(3)


def test_type_mapping_fixes_the_sign_of_byte_and_short(spark):
    schema = T.StructType(
        [
            T.StructField(name, data_type)
            for name, data_type in [
                ("b", T.ByteType()),
                ("s", T.ShortType()),
                ("i", T.IntegerType()),
                ("l", T.LongType()),
                ("f", T.FloatType()),
                ("d", T.DoubleType()),
                ("dec", T.DecimalType(10, 2)),
                ("str", T.StringType()),
                ("bin", T.BinaryType()),
                ("arr", T.ArrayType(T.IntegerType())),
            ]
        ]
    )
    frame = spark.createDataFrame([], schema)
    assert infer_dataframe_schema(frame) == {
        "b": "int8",
        "s": "int16",
        "i": "int32",
        "l": "int64",
        "f": "float32",
        "d": "float64",
        "dec": "str_decimal",
        "str": "str",
        "bin": "bytes",
        "arr": "ndarray:int32",
    }
    assert SPARK_TO_MDS[T.ByteType()] == "int8" and SPARK_TO_MDS[T.BooleanType()] is None
    with pytest.raises(ValueError, match="is not supported by dataframe_to_mds"):
        infer_dataframe_schema(spark.createDataFrame([], T.StructType([T.StructField("t", T.TimestampType())])))


def test_user_columns_are_checked_as_upstream(people):
    assert infer_dataframe_schema(people, {"id": "str", "properties": "json"}) is None
    with pytest.raises(ValueError, match="idd is not a column of input dataframe"):
        infer_dataframe_schema(people, {"idd": "str"})
    with pytest.raises(ValueError, match="strr is not supported by dataframe_to_mds"):
        infer_dataframe_schema(people, {"id": "strr"})
    arrays = people.sparkSession.createDataFrame(
        [], T.StructType([T.StructField("a", T.ArrayType(T.ShortType())), T.StructField("b", T.ByteType())])
    )
    assert infer_dataframe_schema(arrays, {"a": "ndarray:int16:3", "b": "uint8"}) is None
    with pytest.raises(ValueError, match="Mismatched types: column name `a` is `ndarray:int16`"):
        infer_dataframe_schema(arrays, {"a": "ndarray:int32:3"})


def test_is_json_compatible():
    message = T.ArrayType(
        T.StructType([T.StructField("role", T.StringType()), T.StructField("content", T.StringType())])
    )
    assert is_json_compatible(message)
    assert is_json_compatible(T.MapType(T.StringType(), T.ArrayType(T.FloatType())))
    assert not is_json_compatible(T.StructType([T.StructField("data", T.BinaryType())]))
    assert not is_json_compatible(T.MapType(T.IntegerType(), T.StringType()))
    assert not is_json_compatible(T.StructType([T.StructField("d", T.DateType())]))
    assert not is_json_compatible(T.LongType())


def test_end_to_end_with_upstream_arguments(people, tmp_path):
    out = str(tmp_path / "out")
    mds_kwargs = {
        "out": out,
        "columns": {"id": "str", "dept": "str"},
        "keep_local": True,
        "compression": "zstd:7",
        "hashes": ["sha1", "xxh64"],
        "size_limit": 1 << 26,
    }
    assert dataframe_to_mds(people, merge_index=True, mds_kwargs=mds_kwargs) == (out, "")
    shards = load_index(out)["shards"]
    assert sum(shard["samples"] for shard in shards) == 4
    assert all(shard["compression"] == "zstd:7" and shard["hashes"] == ["sha1", "xxh64"] for shard in shards)
    attempt_folders = {shard["zip_data"]["basename"].rsplit("/", 1)[0] for shard in shards}
    assert all(os.path.exists(os.path.join(out, folder, "index.json")) for folder in attempt_folders)
    assert sorted(sample["id"] for sample in read_samples(out)) == ["36636", "39192", "40288", "42114"]
    with pytest.raises(FileExistsError):
        dataframe_to_mds(people, merge_index=True, mds_kwargs=mds_kwargs)
    assert dataframe_to_mds(people, True, {**mds_kwargs, "exist_ok": True, "columns": {"id": "str"}}) == (out, "")
    assert set(read_samples(out)[0]) == {"id"}


def test_inferred_columns_refuse_structs_like_upstream(people, tmp_path):
    with pytest.raises(ValueError, match="is not supported by dataframe_to_mds"):
        dataframe_to_mds(people, mds_kwargs={"out": str(tmp_path / "a")})
    dataframe_to_mds(people.select("id", "dept"), mds_kwargs={"out": str(tmp_path / "b")})
    assert len(read_samples(str(tmp_path / "b"))) == 4


def test_without_merge_index_only_attempt_indexes_exist(people, tmp_path):
    out = str(tmp_path / "out")
    dataframeToMDS(people.select("id"), merge_index=False, mds_kwargs={"out": out, "columns": {"id": "str"}})
    files = files_under(out)
    assert "index.json" not in files and any(path.endswith("/index.json") for path in files)


def test_without_merge_index_one_folder_per_partition_and_arrays_of_non_null_floats(spark, tmp_path):
    # array(...) of non-null expressions is ArrayType(FloatType(), containsNull=False): mapped by element type.
    frame = spark.sql("SELECT id, array(CAST(id AS FLOAT), 0.5F) AS v FROM range(6)").repartition(3)
    assert frame.schema["v"].dataType == T.ArrayType(T.FloatType(), containsNull=False)
    assert infer_dataframe_schema(frame) == {"id": "int64", "v": "ndarray:float32"}
    infer_dataframe_schema(frame, {"v": "ndarray:float32"})
    out = str(tmp_path / "out")
    assert dataframe_to_mds(frame, merge_index=False, mds_kwargs={"out": out}) == (out, "")
    folders = sorted(os.listdir(out))
    assert len(folders) == 3, folders  # upstream's layout: one sub-directory per partition, nothing else
    samples = []
    for folder in folders:
        assert os.path.exists(os.path.join(out, folder, "index.json"))
        samples += read_samples(os.path.join(out, folder))
    assert sorted(int(sample["id"]) for sample in samples) == list(range(6))
    assert all(sample["v"].tolist() == [float(sample["id"]), 0.5] for sample in samples)
    merge_index(out)  # what upstream users run afterwards
    assert sorted(int(sample["id"]) for sample in read_samples(out)) == list(range(6))


@pytest.mark.parametrize("merge", [True, False], ids=["merged", "partitions only"])
def test_every_folder_below_out_is_a_dataset_of_its_own_as_upstreams_tools_expect(spark, tmp_path, merge):
    """Upstream's converter leaves one folder per partition directly below ``out``, each with its own index, and
    (with ``merge_index``) the merged index at the root. Its own tests, and user code building a stream per folder,
    walk ``out`` so: every folder there must be a dataset, and the partitions' samples must add up to the merged
    index's. ``merge_index(out)`` on the partitions gives the same samples as the merged index."""
    frame = spark.range(0, 90, 1, 3).selectExpr("id", "CAST(id AS STRING) AS text")
    out = str(tmp_path / "out")
    dataframe_to_mds(frame, merge_index=merge, mds_kwargs={"out": out, "keep_local": True})
    folders = [name for name in sorted(os.listdir(out)) if os.path.isdir(os.path.join(out, name))]
    partitions = 0
    samples = 0
    for folder in folders:
        shards = load_index(os.path.join(out, folder))["shards"]  # each folder is a dataset
        partitions += bool(shards)
        samples += sum(shard["samples"] for shard in shards)
    assert partitions == 3 and samples == 90
    if merge:
        assert sum(shard["samples"] for shard in load_index(out)["shards"]) == 90
        merged = sorted(int(sample["id"]) for sample in read_samples(out))
        os.remove(os.path.join(out, "index.json"))
    else:
        assert not os.path.exists(os.path.join(out, "index.json"))
        merged = list(range(90))
    merge_index(out)  # upstream's merge of every sub-folder's index
    assert sorted(int(sample["id"]) for sample in read_samples(out)) == merged == list(range(90))


def test_udf_iterable_and_json_columns(spark, tmp_path):
    frame = spark.sql(
        "SELECT id, array(named_struct('role', 'user', 'content', CAST(id AS STRING))) AS messages FROM range(5)"
    )

    def to_samples(pdf, scale):
        for row in pdf.to_dict("records"):
            yield {"id": int(row["id"]) * scale, "messages": [dict(m) for m in row["messages"]]}

    out = str(tmp_path / "out")
    dataframe_to_mds(
        frame,
        mds_kwargs={"out": out, "columns": {"id": "int", "messages": "json"}},
        udf_iterable=to_samples,
        udf_kwargs={"scale": 10},
    )
    samples = sorted(read_samples(out), key=lambda s: s["id"])
    assert [s["id"] for s in samples] == [0, 10, 20, 30, 40]
    assert samples[2]["messages"] == [{"role": "user", "content": "2"}]
    with pytest.raises(ValueError, match="must provide correct `columns`"):
        dataframe_to_mds(frame, mds_kwargs={"out": str(tmp_path / "x")}, udf_iterable=to_samples)


def test_decimal_and_arrays_as_upstream_tests_use_them(spark, tmp_path):
    frame = spark.createDataFrame(
        [(1, "Alice", Decimal("123.45")), (2, "Bob", Decimal("-67.80"))], "id INT, name STRING, amount DECIMAL(10,2)"
    )
    out = str(tmp_path / "dec")
    dataframe_to_mds(frame, mds_kwargs={"out": out, "columns": {"id": "int32", "name": "str", "amount": "str_decimal"}})
    assert sorted(str(s["amount"]) for s in read_samples(out)) == ["-67.80", "123.45"]
    arrays = spark.createDataFrame([([1, 2, 3], [1.0, 2.0, 3.0])], "a ARRAY<SMALLINT>, b ARRAY<DOUBLE>")
    out = str(tmp_path / "arr")
    dataframe_to_mds(arrays, mds_kwargs={"out": out, "columns": {"a": "ndarray:int16:3", "b": "ndarray:float64:3"}})
    sample = read_samples(out)[0]
    assert sample["a"].dtype == np.int16 and sample["a"].tolist() == [1, 2, 3] and sample["b"].tolist() == [1, 2, 3]


def test_empty_or_missing_input_is_refused_as_upstream(spark, tmp_path):
    with pytest.raises(ValueError, match="Input dataframe is None or Empty!"):
        dataframe_to_mds(spark.range(0), mds_kwargs={"out": str(tmp_path)})
    with pytest.raises(ValueError, match="`out` and `columns` need to be specified"):
        dataframe_to_mds(spark.range(2), mds_kwargs={})


def test_importing_without_pyspark_says_what_to_install():
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "try:\n    import streaming.base.converters\nexcept ImportError as err:\n    print(err)\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert install_command("spark") in output


def test_the_spark_path_never_imports_torch():
    code = "import sys, streaming.spark, streaming.base.converters, streaming.spark.task\nprint('torch' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "False"
