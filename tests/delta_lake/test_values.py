"""Values of every kind Delta Lake writes, read without Spark as Spark's reader gives them (issue 45, items 2-4).

Each table is written by Delta Lake through Spark SQL, then converted twice: by ``mds-streaming convert`` in a
process without Spark (delta-rs pins the version, `streaming.delta.scan` reads the files), and by
`dataframe_to_mds` of the table read by Spark's Delta reader. The two datasets must hold the same samples, and
those must be the rows Spark's reader gives (compared in exact integers: ``unix_micros``, ``unix_date``, or the
JSON text ``to_json`` gives a VARIANT). A table still refused is refused in one sentence naming it and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import LocalDataset
from streaming.delta.scan import snapshot_rows
from streaming.delta.snapshot import Snapshot
from streaming.spark import dataframe_to_mds
from tests.delta_lake.followed import table_location

#: Every Delta command is a Spark job or several: a test of a few commands takes minutes on a busy machine.
pytestmark = pytest.mark.timeout(1800)
MDS_STREAMING = str(Path(sys.executable).with_name("mds-streaming"))
#: The instants of Spark's whole range, and the calendar's turning points between.
INSTANTS = [
    "0001-01-01 00:00:00",
    "1000-06-15 12:34:56.789012",
    "1582-10-04 23:59:59.999999",
    "1582-10-15 00:00:00",
    "1899-12-31 23:59:59",
    "1969-12-31 23:59:59.999999",
    "1970-01-01 00:00:00",
    "2024-02-29 01:02:03.000004",
    "2262-04-11 23:47:16.854776",  # past the last nanosecond an int64 holds
    "9999-12-31 23:59:59.999999",
]


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``mds-streaming`` in a process of its own, without Spark (a native abort would show as a signal)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK")}
    return subprocess.run([MDS_STREAMING, *argv, "--quiet"], capture_output=True, text=True, env=env, timeout=600)


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return _plain(value.tolist()) if hasattr(value, "tolist") else value


def _samples(out: Path) -> Counter:
    """A dataset's samples as a multiset of JSON texts."""
    return Counter(json.dumps(_plain(dict(sample)), sort_keys=True) for sample in LocalDataset(str(out)))


def _both_ways(spark: Any, name: str, tmp_path: Path) -> Counter:
    """Convert the table without Spark (its path) and with Spark (by name): the two datasets' samples, equal."""
    converted = _cli("convert", table_location(spark, name), str(tmp_path / "without-spark"))
    assert converted.returncode == 0, converted.stderr
    dataframe_to_mds(spark.read.table(name), str(tmp_path / "spark"), spark=spark, progress=False)
    without = _samples(tmp_path / "without-spark")
    assert without == _samples(tmp_path / "spark")
    return without


def _column(samples: Counter, name: str) -> Counter:
    """One column of the samples, as a multiset of JSON texts."""
    found: Counter = Counter()
    for text, count in samples.items():
        found[json.dumps(json.loads(text)[name])] += count
    return found


def _oracle(spark: Any, sql: str) -> Counter:
    """One value per row from Spark's reader, in the samples' spelling."""
    return Counter(json.dumps(_plain(row[0])) for row in spark.sql(sql).collect())


@contextmanager
def _conf(spark: Any, **settings: str) -> Iterator[None]:
    """Spark SQL settings (``__`` for ``.``) for the block, then back as they were."""
    keys = {key.replace("__", "."): value for key, value in settings.items()}
    before = {key: spark.conf.get(key, None) for key in keys}
    for key, value in keys.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _physical_types(spark: Any, name: str, column: str) -> set[str]:
    """The Parquet physical type (and unit) of the flat ``column`` in each of the table's data files."""
    units = {"milliseconds": "/ms", "microseconds": "/us", "nanoseconds": "/ns"}
    found = set()
    for path in Path(table_location(spark, name)).glob("*.parquet"):
        file = pq.ParquetFile(path)
        leaf = file.schema.column(file.schema_arrow.get_field_index(column))
        found.add(leaf.physical_type + units.get(json.loads(leaf.logical_type.to_json()).get("timeUnit"), ""))
    return found


# -- item 2: timestamps -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("output", "physical"),
    [("INT96", "INT96"), ("TIMESTAMP_MICROS", "INT64/us"), ("TIMESTAMP_MILLIS", "INT64/ms")],
    ids=["int96", "int64-micros", "int64-millis"],
)
def test_timestamps_of_every_parquet_type_from_year_1_to_9999(delta_spark, table_name, tmp_path, output, physical):
    """Spark writes TIMESTAMP as INT96 by default; year 9999 read as Arrow's default nanoseconds overflowed."""
    spark = delta_spark
    with _conf(spark, spark__sql__parquet__outputTimestampType=output):
        spark.sql(
            f"CREATE TABLE {table_name} (id INT, t TIMESTAMP, n TIMESTAMP_NTZ, d DATE) USING delta "
            f"TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
        )
        rows = [
            f"({index}, TIMESTAMP'{at}', TIMESTAMP_NTZ'{at}', DATE'{at[:10]}')" for index, at in enumerate(INSTANTS)
        ]
        spark.sql(f"INSERT INTO {table_name} VALUES {', '.join(rows)}, (99, NULL, NULL, NULL)")
    assert _physical_types(spark, table_name, "t") == {physical}
    samples = _both_ways(spark, table_name, tmp_path)
    assert _column(samples, "t") == _oracle(spark, f"SELECT unix_micros(t) FROM {table_name}")
    assert _column(samples, "n") == _oracle(spark, f"SELECT unix_micros(CAST(n AS TIMESTAMP)) FROM {table_name}")
    assert _column(samples, "d") == _oracle(spark, f"SELECT unix_date(d) FROM {table_name}")
    assert json.dumps(253402300799999999 if output != "TIMESTAMP_MILLIS" else 253402300799999000) in _column(
        samples, "t"
    )


def test_a_file_in_the_legacy_julian_calendar_is_refused_before_1900_and_read_after(delta_spark, table_name, tmp_path):
    """Spark's LEGACY rebase mode writes the hybrid Julian calendar and marks the file; Spark's reader shifts old
    values back by its session's rules. Without Spark such a file is read where no rule shifts (1900 on) and
    refused, in one sentence naming the column and file, where one would."""
    spark = delta_spark
    legacy = {"spark__sql__parquet__int96RebaseModeInWrite": "LEGACY"}
    legacy["spark__sql__parquet__datetimeRebaseModeInWrite"] = "LEGACY"
    with _conf(spark, **legacy):
        spark.sql(f"CREATE TABLE {table_name} (id INT, t TIMESTAMP) USING delta")
        spark.sql(f"INSERT INTO {table_name} VALUES (1, TIMESTAMP'1950-01-01 00:00:00'), (2, NULL)")
    samples = _both_ways(spark, table_name, tmp_path / "modern")
    assert _column(samples, "t") == _oracle(spark, f"SELECT unix_micros(t) FROM {table_name}")
    with _conf(spark, **legacy):
        spark.sql(f"INSERT INTO {table_name} VALUES (3, TIMESTAMP'1000-01-01 00:00:00')")
    path = table_location(spark, table_name)
    refused = _cli("convert", path, str(tmp_path / "old"))
    assert refused.returncode == 1, refused.stderr
    said = " ".join(refused.stderr.split())
    assert f"column 't' of {path}/part-" in said, said
    assert "holds dates or timestamps before 1900 written in Spark's legacy hybrid Julian calendar" in said, said


# -- item 3: type widening ---------------------------------------------------------------------------------------
#: Every widening Delta 4 defines (Delta's PROTOCOL.md, "Type Widening"), as (narrow type, value, wide type, value).
WIDENINGS = [
    ("TINYINT", "-128", "SMALLINT", "-32768"),
    ("TINYINT", "127", "INT", "2147483647"),
    ("TINYINT", "-1", "BIGINT", "9223372036854775807"),
    ("TINYINT", "100", "DECIMAL(10,0)", "9999999999"),
    ("TINYINT", "-7", "DOUBLE", "0.5"),
    ("SMALLINT", "32767", "INT", "-2147483648"),
    ("SMALLINT", "-32768", "BIGINT", "1"),
    ("SMALLINT", "12345", "DECIMAL(12,2)", "1234567890.12"),
    ("SMALLINT", "-2", "DOUBLE", "1e300"),
    ("INT", "2147483647", "BIGINT", "-9223372036854775808"),
    ("INT", "-2147483648", "DECIMAL(10,0)", "1"),
    ("INT", "123456789", "DOUBLE", "-0.25"),
    ("BIGINT", "-9223372036854775808", "DECIMAL(20,0)", "99999999999999999999"),
    ("FLOAT", "1.1", "DOUBLE", "0.1"),
    ("DECIMAL(5,2)", "-999.99", "DECIMAL(10,4)", "123456.1234"),
    ("DECIMAL(5,2)", "1.5", "DECIMAL(38,2)", "-123456789012345678901234567890123456.78"),
    ("DATE", "DATE'0001-01-01'", "TIMESTAMP_NTZ", "TIMESTAMP_NTZ'9999-12-31 23:59:59.999999'"),
]


def test_every_type_widening_delta_defines_reads_older_files_at_the_new_type(delta_spark, table_name, tmp_path):
    """Each column is written narrow, widened with ALTER TABLE, then written wide: the older file's values are
    cast up as Spark casts them, at the top level and inside a struct, an array and a map."""
    spark = delta_spark
    columns = ", ".join(f"c{index} {narrow}" for index, (narrow, _, _, _) in enumerate(WIDENINGS))
    spark.sql(
        f"CREATE TABLE {table_name} (id INT, {columns}, s STRUCT<x: SMALLINT, y: FLOAT>, a ARRAY<TINYINT>, "
        f"m MAP<INT, FLOAT>) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = 'true', "
        f"'delta.feature.timestampNtz' = 'supported', 'delta.enableDeletionVectors' = 'false')"
    )
    narrow_values = ", ".join(value for _, value, _, _ in WIDENINGS)
    spark.sql(
        f"INSERT INTO {table_name} VALUES (1, {narrow_values}, named_struct('x', 7, 'y', 0.1), array(1, -2, NULL), "
        f"map(1, 2.5, 2, NULL)), (2, {', '.join('NULL' for _ in WIDENINGS)}, NULL, NULL, NULL)"
    )
    for index, (_, _, wide, _) in enumerate(WIDENINGS):
        spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN c{index} TYPE {wide}")
    for column, wide in (("s.x", "INT"), ("s.y", "DOUBLE"), ("a.element", "INT"), ("m.value", "DOUBLE")):
        spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN {column} TYPE {wide}")
    spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN m.key TYPE BIGINT")
    wide_values = ", ".join(value for _, _, _, value in WIDENINGS)
    spark.sql(
        f"INSERT INTO {table_name} VALUES (3, {wide_values}, named_struct('x', 100000, 'y', 1e300), "
        f"array(100000), map(9000000000, 1e300))"
    )
    features = spark.sql(f"DESCRIBE DETAIL {table_name}").collect()[0]["tableFeatures"]
    assert "typeWidening" in features
    samples = _both_ways(spark, table_name, tmp_path)
    assert len(list(samples.elements())) == 3
    for index, (_, _, wide, _) in enumerate(WIDENINGS):
        if wide.startswith("DECIMAL"):
            expression = f"CAST(c{index} AS STRING)"
        elif wide == "TIMESTAMP_NTZ":
            expression = f"unix_micros(CAST(c{index} AS TIMESTAMP))"
        else:
            expression = f"c{index}"
        assert _column(samples, f"c{index}") == _oracle(spark, f"SELECT {expression} FROM {table_name}"), wide
    structs = spark.sql(f"SELECT s FROM {table_name}").collect()
    assert _column(samples, "s") == Counter(json.dumps(row[0] and row[0].asDict(), sort_keys=True) for row in structs)


#: A widening between two runs of the scheduled job: (narrow type, value, the ALTER's target, wide type, value,
#: the encodings it changes, None where the dataset's encoding holds the wider values as they are).
BETWEEN_RUNS = [
    ("TINYINT", "1", "", "BIGINT", "3000000000", "int8 -> int64"),
    ("INT", "1", "", "DOUBLE", "0.5", "int32 -> float64"),
    ("FLOAT", "1.5", "", "DOUBLE", "1e300", "float32 -> float64"),
    ("DATE", "DATE'2024-01-01'", "", "TIMESTAMP_NTZ", "TIMESTAMP_NTZ'2024-01-01 01:02:03'", "int32 -> int64"),
    ("DECIMAL(5,2)", "1.25", "", "DECIMAL(10,4)", "123456.1234", None),
    ("STRUCT<x: SMALLINT>", "named_struct('x', 3)", ".x", "INT", "named_struct('x', 100000)", None),
]


def test_the_job_rule_for_a_widening_between_runs(delta_spark, table_name, tmp_path):
    """A widening that changes the column's MDS encoding is refused by the next run of either reader, naming the
    table, the version and the column (the dataset's shards cannot hold the wider values); one whose encoding
    holds them (a decimal's ``str_decimal``, a struct's ``json``) appends on, each row as it was read when its
    run stored it (a decimal at the scale it had then)."""
    from streaming.incremental import incremental_to_mds as delta_rs_incremental_to_mds
    from streaming.spark import incremental_to_mds

    spark = delta_spark
    columns = ", ".join(f"c{index} {narrow}" for index, (narrow, *_) in enumerate(BETWEEN_RUNS))
    spark.sql(
        f"CREATE TABLE {table_name} (id INT, {columns}) USING delta TBLPROPERTIES ('delta.enableTypeWidening' = "
        f"'true', 'delta.feature.timestampNtz' = 'supported', 'delta.enableDeletionVectors' = 'false')"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, {', '.join(row[1] for row in BETWEEN_RUNS)})")
    path = table_location(spark, table_name)

    def runs(index: int) -> dict[str, Any]:
        """The next run of each dataset of column ``index``, or the error it stopped with."""
        done: dict[str, Any] = {}
        chosen = ["id", f"c{index}"]
        for mode in ("append", "mirror"):
            key = ["id"] if mode == "mirror" else None
            out = str(tmp_path / f"c{index}-delta-rs-{mode}")
            try:
                done[f"delta-rs-{mode}"] = delta_rs_incremental_to_mds(
                    path, out, columns=chosen, mode=mode, key=key, progress=False
                )
            except ValueError as err:
                done[f"delta-rs-{mode}"] = err
        try:
            out = str(tmp_path / f"c{index}-spark-append")
            done["spark-append"] = incremental_to_mds(table_name, out, spark=spark, columns=chosen, progress=False)
        except ValueError as err:
            done["spark-append"] = err
        return done

    for index in range(len(BETWEEN_RUNS)):
        assert not any(isinstance(result, Exception) for result in runs(index).values())
    for index, (_, _, field, wide, _, _) in enumerate(BETWEEN_RUNS):
        spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN c{index}{field} TYPE {wide}")
    spark.sql(f"INSERT INTO {table_name} VALUES (2, {', '.join(row[4] for row in BETWEEN_RUNS)})")
    version = int(spark.sql(f"DESCRIBE HISTORY {table_name} LIMIT 1").collect()[0]["version"])
    for index, (*_, changed) in enumerate(BETWEEN_RUNS):
        results = runs(index)
        if changed is None:
            assert not any(isinstance(result, Exception) for result in results.values()), results
            continue
        for run, result in results.items():
            table = table_name if run.startswith("spark") else path
            assert str(result) == (
                f"Version {version} of {table!r} widened the type of c{index} ({changed}) (Delta type widening, "
                f"delta.enableTypeWidening): its values may no longer fit the dataset's shards. Choices: convert "
                f"the table again into a new dataset (dataframe_to_mds({table!r}, out, mode='overwrite'))."
            ), run
    decimals = {
        run: sorted(str(sample["c4"]) for sample in LocalDataset(str(tmp_path / f"c4-{run}")))
        for run in ("delta-rs-append", "delta-rs-mirror", "spark-append")
    }
    assert decimals == dict.fromkeys(decimals, ["1.25", "123456.1234"])
    structs = {
        run: sorted(sample["c5"]["x"] for sample in LocalDataset(str(tmp_path / f"c5-{run}")))
        for run in ("delta-rs-append", "delta-rs-mirror", "spark-append")
    }
    assert structs == dict.fromkeys(structs, [3, 100000])


# -- item 4: VARIANT -----------------------------------------------------------------------------------------------
#: VARIANT values of every type Spark 4.0 writes, with the corners of its JSON text (Java's number spelling,
#: Jackson's escapes, plain decimals, the calendar's ends).
VARIANTS = [
    'parse_json(\'{"b": 1, "a": [1.5, "x", null, true, false], "c": {"d": 1e10, "e": {}}, "": []}\')',
    "parse_json('[0.1, 1e-5, 1e7, 9999999.0, 0.001, 123456789.123, -0.0, 1.7976931348623157e308, -2.5e-3]')",
    'parse_json(\'"tab\\\\t quote\\\\" back\\\\\\\\ ctrl\\\\u0001 é 𝄞 \\\\u007f"\')',
    "parse_json('12345678901234567890')",
    "parse_json('-42')",
    "parse_json('null')",
    "NULL",
    "to_variant_object(named_struct('t', TIMESTAMP'0001-01-01 00:00:00', 'n', TIMESTAMP_NTZ'9999-12-31 "
    "23:59:59.999999', 'd', DATE'2024-02-29', 'f', CAST(1.1 AS FLOAT), 'g', CAST(3e38 AS FLOAT), "
    "'dec', CAST(-1.50 AS DECIMAL(5,2)), 'big', CAST(100 AS DECIMAL(38,0)), 'z', CAST(0 AS DECIMAL(4,3)), "
    "'bin', X'00FF10', 'b', true, 'i8', CAST(-128 AS TINYINT), 'ts', TIMESTAMP'2024-01-02 03:04:05.120000'))",
    "to_variant_object(array(named_struct('k', 1), named_struct('k', 2)))",
    "CAST(CAST('NaN' AS DOUBLE) AS VARIANT)",
    "CAST(CAST('-Infinity' AS FLOAT) AS VARIANT)",
    "CAST(DATE'0001-01-01' AS VARIANT)",
]
#: Spark's settings that make its writer shred VARIANTs by a given schema (and its reader read them back).
SHREDDED = {
    "spark__sql__variant__writeShredding__enabled": "true",
    "spark__sql__variant__forceShreddingSchemaForTest": "a INT, b STRING, c ARRAY<DOUBLE>, d DECIMAL(9,2), "
    "t TIMESTAMP, o STRUCT<x: BIGINT, y: FLOAT>",
    "spark__sql__variant__allowReadingShredded": "true",
}
#: Values that fit the shredding schema, partly fit it, or do not fit it at all.
SHREDDED_VARIANTS = [
    *VARIANTS,
    'parse_json(\'{"a": 1, "b": "x", "c": [1.5, 2, "no"], "d": 1.25, "o": {"x": 5, "y": 0.5}}\')',
    'parse_json(\'{"a": "not an int", "b": null, "z": {"q": [null]}, "o": {"x": 1, "w": 2}}\')',
    'parse_json(\'{"a": 2147483648, "o": [1]}\')',
    "to_variant_object(named_struct('t', TIMESTAMP'9999-12-31 23:59:59.999999', 'd', CAST(7 AS DECIMAL(9,2))))",
]


@pytest.mark.parametrize("shredded", [False, True], ids=["unshredded", "shredded"])
def test_variant_is_read_as_the_json_text_spark_gives(delta_spark, table_name, tmp_path, shredded):
    """The JSON text of each value equals ``to_json`` of Spark's reader, character for character, and both
    conversions store the same samples; shredded files (Spark's writer with a shredding schema) too."""
    spark = delta_spark
    values = SHREDDED_VARIANTS if shredded else VARIANTS
    settings = SHREDDED if shredded else {}
    properties = "'delta.enableVariantShredding' = 'true'" if shredded else "'delta.enableDeletionVectors' = 'false'"
    with _conf(spark, **settings):
        spark.sql(f"CREATE TABLE {table_name} (id INT, v VARIANT) USING delta TBLPROPERTIES ({properties})")
        selects = " UNION ALL ".join(f"SELECT {index} AS id, {value} AS v" for index, value in enumerate(values))
        spark.sql(f"INSERT INTO {table_name} {selects}")
        expected = {row[0]: row[1] for row in spark.sql(f"SELECT id, to_json(v) FROM {table_name}").collect()}
        path = table_location(spark, table_name)
        if shredded:
            assert "variantShredding-preview" in Snapshot.open(path).reader_features
            groups = {pq.ParquetFile(file).schema_arrow.field("v").type for file in Path(path).glob("*.parquet")}
            assert all("typed_value" in {field.name for field in group} for group in groups), groups
        rows = snapshot_rows(Snapshot.open(path))
        assert pa.types.is_string(rows.schema.field("v").type.storage_type)
        read = dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist()))
        assert read == expected
        samples = _both_ways(spark, table_name, tmp_path)
    job = _cli("incremental", path, str(tmp_path / "job"))  # the scheduled job without Spark reads it too
    assert job.returncode == 0, job.stderr
    assert _samples(tmp_path / "job") == samples
    assert _column(samples, "v") == Counter(
        json.dumps(None if text is None else json.loads(text)) for text in expected.values()
    )


def test_a_table_listing_variant_type_without_a_variant_column_is_read(delta_spark, table_name, tmp_path):
    """What deltalake's RESTOREs leave in generated histories: the protocol lists ``variantType``, no column is
    a VARIANT."""
    spark = delta_spark
    spark.sql(
        f"CREATE TABLE {table_name} (id INT, v STRING) USING delta "
        f"TBLPROPERTIES ('delta.feature.variantType' = 'supported')"
    )
    spark.sql(f"INSERT INTO {table_name} VALUES (1, 'a'), (2, NULL)")
    assert "variantType" in Snapshot.open(table_location(spark, table_name)).reader_features
    samples = _both_ways(spark, table_name, tmp_path)
    assert _column(samples, "v") == _oracle(spark, f"SELECT v FROM {table_name}")
    incremental = _cli("incremental", table_location(spark, table_name), str(tmp_path / "job"))
    assert incremental.returncode == 0, incremental.stderr
    assert _samples(tmp_path / "job") == samples


def test_a_variant_inside_a_struct_is_refused_in_one_sentence_by_both_paths(delta_spark, table_name, tmp_path):
    spark = delta_spark
    spark.sql(f"CREATE TABLE {table_name} (id INT, s STRUCT<v: VARIANT>) USING delta")
    spark.sql(f"INSERT INTO {table_name} SELECT 1, named_struct('v', parse_json('1'))")
    path = table_location(spark, table_name)
    refused = _cli("convert", path, str(tmp_path / "out"))
    assert refused.returncode == 1, refused.stderr
    assert (
        f"The Delta table {path} holds a VARIANT inside the column(s) s, which is read only as a top-level "
        f"column (as Spark's path stores it)"
    ) in " ".join(refused.stderr.split()), refused.stderr
    with pytest.raises(ValueError, match="VARIANT is stored"):
        dataframe_to_mds(spark.read.table(table_name), str(tmp_path / "spark"), spark=spark, progress=False)
