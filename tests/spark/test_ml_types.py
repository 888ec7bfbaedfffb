"""Spark ML vectors, arrays of arrays and VARIANT converted with default arguments, read back, trained on.

Oracles: Spark's own values (``Vector.toArray()``, the collected arrays, ``to_json``), the per-sample read path
and torch's ``default_collate`` (batches read as columns must be identical, so must a few training steps),
MosaicML Streaming (streaming-community 0.14.2 reads every dataset written here), and the command line's pyarrow
engine, which must apply the same rules to the same table exported as Parquet.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import numpy as np
import pytest
import torch
from pyspark.ml import Pipeline
from pyspark.ml.feature import OneHotEncoder, StandardScaler, StringIndexer, VectorAssembler
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql import types as T

from streaming import StreamingDataLoader, StreamingDataset
from streaming.convert.arrow_engine import convert_files
from streaming.spark import dataframe_to_mds
from tests.helpers import assert_same_value
from tests.spark.helpers import reference_reads


def _pipeline_output(spark: Any) -> Any:
    """A Spark ML pipeline's output table: indexed, one-hot (sparse) and assembled, scaled (dense) vectors."""
    rows = [(i, float(i % 13), float(i % 7) * 0.5, ["a", "b", "c"][i % 3], float(i % 2)) for i in range(240)]
    frame = spark.createDataFrame(rows, "id long, x double, y double, cat string, label double")
    stages = [
        StringIndexer(inputCol="cat", outputCol="cat_index"),
        OneHotEncoder(inputCols=["cat_index"], outputCols=["cat_vector"]),
        VectorAssembler(inputCols=["x", "y", "cat_vector"], outputCol="raw"),
        StandardScaler(inputCol="raw", outputCol="features", withMean=True),
    ]
    return Pipeline(stages=stages).fit(frame).transform(frame)


def _batches(local: str, batch_reads: bool, workers: int) -> list[dict[str, Any]]:
    os.environ["STREAMING_BATCH_READS"] = "1" if batch_reads else "0"
    try:
        dataset = StreamingDataset(local=local, batch_size=32, shuffle=True, shuffle_seed=7)
        loader = StreamingDataLoader(dataset, batch_size=32, num_workers=workers)
        assert loader._reads_columns() is batch_reads
        return list(loader)
    finally:
        del os.environ["STREAMING_BATCH_READS"]


def _train(batches: list[dict[str, Any]]) -> list[float]:
    """A few steps of logistic regression on the batches' features; the losses."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, dtype=torch.float64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for batch in batches:
        logits = model(batch["features"]).squeeze(1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, batch["label"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def test_a_spark_ml_pipelines_table_converts_with_defaults_and_trains_in_batches(spark, tmp_path):
    table = _pipeline_output(spark)
    out = str(tmp_path / "ml")
    result = dataframe_to_mds(table, out, progress=False)
    assert result.columns["features"] == result.columns["raw"] == result.columns["cat_vector"] == "ndarray:float64"
    assert not result.nulls
    expected = {row["id"]: row for row in table.collect()}
    dataset = StreamingDataset(local=out, batch_size=32)
    for index in range(dataset.num_samples):
        sample = dataset[index]
        row = expected[int(sample["id"])]
        for name in ("features", "raw", "cat_vector"):  # dense and sparse vectors, densified to their size
            assert sample[name].dtype == np.float64
            assert np.array_equal(sample[name], row[name].toArray()), (name, sample[name], row[name])
    for workers in (0, 2):
        columnar = _batches(out, True, workers)
        per_sample = _batches(out, False, workers)
        assert_same_value(columnar, per_sample, "batches")
        assert columnar[0]["features"].shape == (32, 4) and columnar[0]["features"].dtype == torch.float64
        losses = _train(columnar)
        assert losses == _train(per_sample)
        assert losses[-1] < losses[0]
    reference = reference_reads(out)
    assert len(reference) == len(expected)
    for sample in reference:
        assert sample["features"] == expected[sample["id"]]["features"].toArray().tolist()
        assert sample["cat_vector"] == expected[sample["id"]]["cat_vector"].toArray().tolist()


def _vectors(spark: Any) -> Any:
    schema = T.StructType(
        [T.StructField("id", T.LongType()), T.StructField("v", VectorUDT()), T.StructField("s", VectorUDT())]
    )
    rows = [
        (0, Vectors.dense([1.0, -2.5, 3.0, 0.0]), Vectors.sparse(6, [1, 4], [7.0, -1.0])),
        (1, None, Vectors.dense([0.5] * 6)),
        (2, Vectors.sparse(4, [], []), Vectors.sparse(6, [0, 5], [1e300, -0.0])),
        (3, Vectors.dense([9.0, 8.0, 7.0, 6.0]), Vectors.sparse(6, [2], [3.25])),
    ]
    return spark.createDataFrame(rows, schema).repartition(2)


def test_vectors_nulls_dtypes_fixed_sizes_and_sparse_parts(spark, tmp_path):
    frame = _vectors(spark)
    expected = {row["id"]: row for row in frame.collect()}
    out = str(tmp_path / "defaults")
    with pytest.warns(UserWarning, match=r"'v' \(1 NULL, mask 'v__is_null'\)"):
        result = dataframe_to_mds(frame, out, progress=False)
    assert result.columns == {"id": "int64", "v": "ndarray:float64", "v__is_null": "uint8", "s": "ndarray:float64"}
    dataset = StreamingDataset(local=out, batch_size=4)
    for index in range(4):
        sample = dataset[index]
        row = expected[int(sample["id"])]
        assert sample["v"] is None if row["v"] is None else np.array_equal(sample["v"], row["v"].toArray())
        assert np.array_equal(sample["s"], row["s"].toArray()) and sample["s"].shape == (6,)
    reference = {sample["id"]: sample for sample in reference_reads(out)}
    assert reference[1]["v"] == [] and reference[1]["v__is_null"] == 1  # MosaicML Streaming sees the two columns
    assert reference[2]["s"] == [1e300, 0.0, 0.0, 0.0, 0.0, -0.0]

    chosen = {"id": None, "s": "sparse:float32", "v": "json"}
    out = str(tmp_path / "chosen")
    result = dataframe_to_mds(frame.where("v IS NOT NULL"), out, columns=chosen, progress=False)
    assert result.columns == {
        "id": "int64",
        "s__indices": "ndarray:int32",
        "s__size": "int32",
        "s__values": "ndarray:float32",
        "v": "json",
    }
    for sample in StreamingDataset(local=out, batch_size=4):
        row = expected[int(sample["id"])]
        vector = row["s"]
        if hasattr(vector, "indices"):
            assert sample["s__indices"].tolist() == vector.indices.tolist()
            assert sample["s__values"].tolist() == vector.values.astype(np.float32).tolist()
        else:
            assert sample["s__indices"].tolist() == list(range(6))
        assert int(sample["s__size"]) == vector.size
        assert sample["v"]["size"] is None or sample["v"]["type"] == 0  # the vector's struct, as JSON
    assert len(reference_reads(out)) == 3

    out = str(tmp_path / "fixed")
    fixed = {"id": None, "s": "ndarray:float32:6"}
    dataframe_to_mds(frame, out, columns=fixed, progress=False)
    samples = list(StreamingDataset(local=out, batch_size=4))
    assert all(sample["s"].dtype == np.float32 and sample["s"].shape == (6,) for sample in samples)
    with pytest.raises(Exception, match=r"holds an array of 6 elements but 'ndarray:float64:4' needs exactly 4"):
        dataframe_to_mds(frame, str(tmp_path / "wrong"), columns={"s": "ndarray:float64:4"}, progress=False)


def test_arrays_of_arrays_are_shaped_ndarrays_ragged_ones_json(spark, tmp_path):
    rows = [
        (0, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[1, 2], [3, 4]], [[[1, 2]], [[3, 4]]]),
        (1, [[7.0], [8.0]], [[5]], [[[5, 6, 7]]]),
        (2, [], [[6], [7, 8]], [[[8], [9]], [[1], [2]]]),
    ]
    schema = "id long, m array<array<float>>, ragged array<array<int>>, cube array<array<array<short>>>"
    frame = spark.createDataFrame(rows, schema)
    out = str(tmp_path / "nested")
    with pytest.warns(UserWarning, match=r"\['ragged'\] hold arrays of arrays that are not rectangular"):
        result = dataframe_to_mds(frame, out, progress=False)
    assert result.columns == {"id": "int64", "m": "ndarray:float32", "ragged": "json", "cube": "ndarray:int16"}
    assert result.ragged_json == ["ragged"]
    samples = {int(s["id"]): s for s in StreamingDataset(local=out, batch_size=3)}
    assert samples[0]["m"].shape == (2, 3) and samples[0]["m"].tolist() == rows[0][1]
    assert samples[1]["m"].shape == (2, 1) and samples[2]["m"].shape == (0, 0)
    assert samples[2]["ragged"] == [[6], [7, 8]]
    assert samples[2]["cube"].shape == (2, 2, 1) and samples[2]["cube"].dtype == np.int16
    reference = {sample["id"]: sample for sample in reference_reads(out)}
    assert reference[0]["m"] == rows[0][1] and reference[2]["cube"] == rows[2][3]

    with pytest.raises(Exception, match=r"column 'ragged' .* is not rectangular"):
        dataframe_to_mds(frame, str(tmp_path / "explicit"), columns={"ragged": "ndarray:int32"}, progress=False)
    out = str(tmp_path / "flat")
    dataframe_to_mds(frame.where("id = 0"), out, columns={"m": "ndarray:float32:6"}, progress=False)
    assert StreamingDataset(local=out, batch_size=1)[0]["m"].tolist() == [1, 2, 3, 4, 5, 6]


def test_a_null_inside_an_array_of_arrays_makes_it_json(spark, tmp_path):
    frame = spark.createDataFrame([(0, [[1.0, None]]), (1, [[2.0, 3.0]]), (2, None)], "id long, m array<array<double>>")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        result = dataframe_to_mds(frame, str(tmp_path / "out"), progress=False)
    assert result.columns["m"] == "json" and result.nulls_json == ["m"]


def test_variant_is_stored_as_json(spark, tmp_path):
    """pyspark 4 only: the 3.5 lane deselects it (Makefile SPARK35_NOT_RUN), pyspark 3.5 has no VARIANT."""
    frame = spark.sql(
        """SELECT id, parse_json(text) AS v FROM VALUES
           (0, '{"a": [1, 2.5, null], "b": "x"}'), (1, '[true, {"c": {}}]'), (2, 'null'), (3, NULL) AS t(id, text)"""
    )
    out = str(tmp_path / "variant")
    result = dataframe_to_mds(frame, out, progress=False)
    assert result.columns == {"id": "int32", "v": "json"}
    samples = {int(s["id"]): s["v"] for s in StreamingDataset(local=out, batch_size=4)}
    assert samples == {0: {"a": [1, 2.5, None], "b": "x"}, 1: [True, {"c": {}}], 2: None, 3: None}
    assert {sample["id"]: sample["v"] for sample in reference_reads(out)} == samples


def test_the_pyarrow_engine_applies_the_same_rules(spark, tmp_path):
    """The pipeline's table and nested arrays exported as Parquet by Spark, converted by the command line's engine:
    the same columns and the same values as converting the DataFrame."""
    table = _pipeline_output(spark).select("id", "features", "cat_vector", "label")
    nested = spark.createDataFrame(
        [(i, [[float(i), 1.0], [2.0, 3.0]], [[i]] * (i % 2 + 1) if i % 3 else [[1, 2], [3]]) for i in range(30)],
        "id long, m array<array<double>>, r array<array<int>>",
    )
    for name, frame in (("ml", table), ("nested", nested)):
        parquet = str(tmp_path / f"{name}.parquet")
        frame.write.parquet(parquet)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from_spark = dataframe_to_mds(frame, str(tmp_path / f"{name}-spark"), progress=False)
            from_files = convert_files(parquet, str(tmp_path / f"{name}-files"))
        assert from_files.columns == from_spark.columns
        assert from_files.ragged_json == from_spark.ragged_json

        def by_id(local: str) -> dict[int, Any]:
            return {int(s["id"]): s for s in StreamingDataset(local=local, batch_size=8)}

        spark_samples, file_samples = by_id(str(tmp_path / f"{name}-spark")), by_id(str(tmp_path / f"{name}-files"))
        assert sorted(spark_samples) == sorted(file_samples)
        for key, sample in spark_samples.items():
            assert json.dumps(_plain(sample)) == json.dumps(_plain(file_samples[key]))


def _plain(sample: dict[str, Any]) -> dict[str, Any]:
    return {k: v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v for k, v in sample.items()}
