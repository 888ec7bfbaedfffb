"""The column-at-a-time Arrow encoder: byte-identical to MDSWriter's per-sample encoding, and its refusals."""

from __future__ import annotations

import datetime
import json
import os
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from streaming.convert.arrow_encoder import BatchEncoder, ColumnValueError
from streaming.convert.json_values import json_payloads
from streaming.format import MDSWriter
from streaming.format.mds.encodings import get_mds_coder

EPOCH = datetime.date(1970, 1, 1)


def split_samples(buffer: memoryview, sizes: np.ndarray) -> list[bytes]:
    out, position = [], 0
    for size in sizes:
        out.append(bytes(buffer[position : position + int(size)]))
        position += int(size)
    assert position == len(buffer)
    return out


def writer_bytes(tmp_path, columns: dict[str, str], samples: list[dict]) -> list[bytes]:
    writer = MDSWriter(out=os.path.join(tmp_path, "w"), columns=columns)
    encoded = [writer.encode_sample(sample) for sample in samples]
    writer.finish()
    return encoded


def test_matches_writer_for_every_vectorised_encoding(tmp_path):
    rng = np.random.default_rng(7)
    rows = 200
    lengths = rng.integers(1, 300, rows)
    arrays = [rng.standard_normal(n).astype(np.float32) for n in lengths]
    texts = ["".join(chr(c) for c in rng.integers(32, 0x2FF, int(n))) for n in rng.integers(0, 40, rows)]
    blobs = [rng.bytes(int(n)) for n in rng.integers(0, 50, rows)]
    ints = rng.integers(-(2**63), 2**63 - 1, rows, dtype=np.int64)
    small = rng.integers(-128, 128, rows).astype(np.int8)
    floats = rng.standard_normal(rows)
    floats[:3] = [np.nan, -0.0, np.inf]
    decimals = [Decimal(f"{int(v)}.{abs(int(v)) % 100:02d}") for v in rng.integers(-(10**6), 10**6, rows)]
    dates = rng.integers(-100000, 100000, rows).astype(np.int32)
    batch = pa.RecordBatch.from_pydict(
        {
            "a_ints": pa.array(ints),
            "b_small": pa.array(small),
            "c_float": pa.array(floats),
            "d_text": pa.array(texts),
            "e_blob": pa.array(blobs, pa.binary()),
            "f_dec": pa.array(decimals, pa.decimal128(12, 2)),
            "g_date": pa.array(dates, pa.date32()),
            "h_vec": pa.array([a.tolist() for a in arrays], pa.list_(pa.float32())),
            "i_flag": pa.array(rng.integers(0, 2, rows).astype(bool)),
            "j_fixed": pa.array([[i, i + 1, i + 2, i + 3] for i in range(rows)], pa.list_(pa.int64())),
            "k_wide": pa.array(small.astype(np.int32)),
        }
    )
    columns = {
        "a_ints": "int64",
        "b_small": "int8",
        "c_float": "float64",
        "d_text": "str",
        "e_blob": "bytes",
        "f_dec": "str_decimal",
        "g_date": "int32",
        "h_vec": "ndarray:float32",
        "i_flag": "uint8",
        "j_fixed": "ndarray:int64:2,2",
        "k_wide": "int16",
    }
    buffer, sizes = BatchEncoder(columns).encode(batch)
    samples = [
        {
            "a_ints": int(ints[i]),
            "b_small": int(small[i]),
            "c_float": float(floats[i]),
            "d_text": texts[i],
            "e_blob": blobs[i],
            "f_dec": decimals[i],
            "g_date": int(dates[i]),
            "h_vec": arrays[i],
            "i_flag": int(batch.column("i_flag")[i].as_py()),
            "j_fixed": np.arange(i, i + 4, dtype=np.int64).reshape(2, 2),
            "k_wide": int(small[i]),
        }
        for i in range(rows)
    ]
    assert split_samples(buffer, sizes) == writer_bytes(tmp_path, columns, samples)


def test_str_decimal_is_the_text_the_writer_gives_every_decimal(tmp_path):
    """Scientific notation included (a scale past 6 digits): pyarrow 14's cast wrote ``2.E-10``, pyarrow 8 has no
    cast to text at all; the bytes are the writer's, ``str(Decimal)``, on every pyarrow."""
    texts = ["2E-10", "0E-10", "-9E-10", "1.5000000000", "-1234567890123456789.1234567890", "1.000E-7"]
    column = pa.array([Decimal(text) for text in texts], pa.decimal128(38, 10))
    assert [str(value) for value in column.to_pylist()] == texts
    buffer, sizes = BatchEncoder({"d": "str_decimal"}).encode(pa.RecordBatch.from_arrays([column], ["d"]))
    expected = writer_bytes(tmp_path, {"d": "str_decimal"}, [{"d": value} for value in column.to_pylist()])
    assert split_samples(buffer, sizes) == expected


def test_dynamic_dtype_ndarray_and_large_shapes(tmp_path):
    values = [list(range(300)), [7], [i % 1000 for i in range(70000)]]
    batch = pa.RecordBatch.from_pydict({"v": pa.array(values, pa.large_list(pa.int16()))})
    buffer, sizes = BatchEncoder({"v": "ndarray"}).encode(batch)
    expected = writer_bytes(tmp_path, {"v": "ndarray"}, [{"v": np.array(v, np.int16)} for v in values])
    assert split_samples(buffer, sizes) == expected


def test_empty_arrays_decode_to_shape_zero():
    batch = pa.RecordBatch.from_pydict({"v": pa.array([[], [1.5]], pa.list_(pa.float64()))})
    buffer, sizes = BatchEncoder({"v": "ndarray:float64"}).encode(batch)
    first, second = split_samples(buffer, sizes)
    coder = get_mds_coder("ndarray:float64")
    empty = coder.decode(first[4:])
    assert empty.shape == (0,) and empty.dtype == np.float64
    assert coder.decode(second[4:]).tolist() == [1.5]


def test_first_row_offset_and_sliced_batches(tmp_path):
    batch = pa.RecordBatch.from_pydict(
        {"s": pa.array(["a", "bb", "ccc", "dddd"]), "v": pa.array([[1], [2, 3], [4, 5, 6], [7]], pa.list_(pa.int32()))}
    ).slice(1, 2)
    buffer, sizes = BatchEncoder({"s": "str", "v": "ndarray:int32"}).encode(batch)
    expected = writer_bytes(
        tmp_path,
        {"s": "str", "v": "ndarray:int32"},
        [{"s": "bb", "v": np.array([2, 3], np.int32)}, {"s": "ccc", "v": np.array([4, 5, 6], np.int32)}],
    )
    assert split_samples(buffer, sizes) == expected


def test_integer_encodings_are_range_checked():
    batch = pa.RecordBatch.from_pydict({"x": pa.array([1, 255, 256], pa.int64())})
    with pytest.raises(ColumnValueError, match=r"row 12: column 'x' holds 256, outside the range of 'uint8'"):
        BatchEncoder({"x": "uint8"}).encode(batch, first_row=10)
    negative = pa.RecordBatch.from_pydict({"x": pa.array([0, -1], pa.int8())})
    with pytest.raises(ColumnValueError, match="holds -1, outside the range of 'uint64'"):
        BatchEncoder({"x": "uint64"}).encode(negative)
    buffer, sizes = BatchEncoder({"x": "uint16"}).encode(batch)
    assert np.frombuffer(bytes(buffer), "<u2").tolist() == [1, 255, 256]


def test_str_int_and_int_encodings(tmp_path):
    batch = pa.RecordBatch.from_pydict({"a": pa.array([-5, 12], pa.int32()), "b": pa.array([True, False])})
    buffer, sizes = BatchEncoder({"a": "str_int", "b": "int"}).encode(batch)
    expected = writer_bytes(tmp_path, {"a": "str_int", "b": "int"}, [{"a": -5, "b": 1}, {"a": 12, "b": 0}])
    assert split_samples(buffer, sizes) == expected


@pytest.mark.parametrize(
    "array, encoding",
    [
        (pa.array([1, None], pa.int32()), "int32"),
        (pa.array([1.0, None], pa.float32()), "float32"),
        (pa.array([True, None]), "uint8"),
        (pa.array(["a", None]), "str"),
        (pa.array([b"a", None]), "bytes"),
        (pa.array([Decimal("1.0"), None], pa.decimal128(3, 1)), "str_decimal"),
        (pa.array([EPOCH, None], pa.date32()), "int32"),
        (pa.array([0, None], pa.timestamp("us", "UTC")), "int64"),
        (pa.array([0, None], pa.timestamp("us")), "int64"),
        (pa.array([0, None], pa.duration("us")), "int64"),
        (pa.array([0, None], pa.time64("ns")), "int64"),
        (pa.array([[1], None], pa.list_(pa.int32())), "ndarray:int32"),
    ],
)
def test_null_in_a_native_encoding_is_refused_with_choices(array, encoding):
    batch = pa.RecordBatch.from_pydict({"col": array})
    with pytest.raises(ColumnValueError) as err:
        BatchEncoder({"col": encoding}, where="Spark partition 3, ").encode(batch, first_row=40)
    message = str(err.value)
    assert message.startswith("Spark partition 3, row 41: column 'col'")
    assert "MDS has no NULL" in message and "'json'" in message and "df.na.fill" in message


def test_null_array_element_is_refused():
    batch = pa.RecordBatch.from_pydict({"v": pa.array([[1.0], [2.0, None]], pa.list_(pa.float64()))})
    with pytest.raises(ColumnValueError, match=r"row 1: column 'v' .* NULL element"):
        BatchEncoder({"v": "ndarray:float64"}).encode(batch)


def test_static_shape_length_is_checked():
    batch = pa.RecordBatch.from_pydict({"v": pa.array([[1, 2], [1, 2, 3]], pa.list_(pa.int32()))})
    with pytest.raises(
        ColumnValueError,
        match=r"row 1: column 'v' holds an array of 3 elements but "
        r"'ndarray:int32:2' needs exactly 2",
    ):
        BatchEncoder({"v": "ndarray:int32:2"}).encode(batch)


def test_json_rule_for_every_arrow_type():
    struct_type = pa.struct(
        [
            ("bin", pa.binary()),
            ("dec", pa.decimal128(4, 2)),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", "UTC")),
            ("ntz", pa.timestamp("us")),
            ("dur", pa.duration("us")),
            ("t", pa.time64("ns")),
            ("m", pa.map_(pa.string(), pa.binary())),
            ("im", pa.map_(pa.int32(), pa.float32())),
            ("dm", pa.map_(pa.decimal128(4, 2), pa.decimal128(10, 3))),
            ("ld", pa.list_(pa.decimal128(38, 10))),
            ("a", pa.list_(pa.list_(pa.int8()))),
            ("i", pa.month_day_nano_interval()),
            ("n", pa.null()),
            ("f", pa.float64()),
        ]
    )
    value = {
        "bin": b"\x00\xff",
        "dec": Decimal("1.50"),
        "d": datetime.date(1969, 12, 31),
        "ts": datetime.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=datetime.timezone.utc),
        "ntz": datetime.datetime(2020, 1, 2, 3, 4, 5, 123456),
        "dur": datetime.timedelta(days=1, microseconds=5),
        "t": 3_000_000_123,
        "m": [("k", b"v"), ("z", None)],
        "im": [(2, 0.5)],
        "dm": [(Decimal("1.50"), Decimal("-0.001")), (Decimal("2"), None)],
        "ld": [Decimal("0"), Decimal("12345.6"), None],
        "a": [[1, None], []],
        "i": pa.MonthDayNano([14, 3, 4_000_005_000]),
        "n": None,
        "f": float("nan"),
    }
    array = pa.array([value, None], struct_type)
    first, second = json_payloads(array)
    assert second == b"null"
    decoded = json.loads(first)
    ntz_micros = int(
        (datetime.datetime(2020, 1, 2, 3, 4, 5, 123456) - datetime.datetime(1970, 1, 1))
        / datetime.timedelta(microseconds=1)
    )
    assert {k: v for k, v in decoded.items() if k != "f"} == {
        "bin": "AP8=",
        "dec": "1.50",
        "d": -1,
        "ts": 1,
        "ntz": ntz_micros,
        "dur": 86_400_000_005,
        "t": 3_000_000_123,
        "m": {"k": "dg==", "z": None},
        "im": [[2, 0.5]],
        # Decimals as Arrow's cast writes them, with the column's scale (pyarrow 8 has no such cast: the same text).
        "dm": {"1.50": "-0.001", "2.00": None},
        "ld": ["0E-10", "12345.6000000000", None],
        "a": [[1, None], []],
        "i": {"months": 14, "days": 3, "microseconds": 4_000_005},
        "n": None,
    }
    assert np.isnan(decoded["f"])
    assert list(decoded) == [field.name for field in struct_type]


def test_json_column_through_the_encoder_matches_the_writer(tmp_path):
    values = [{"role": "user", "n": 3}, None, {"role": None, "n": -1}]
    batch = pa.RecordBatch.from_pydict(
        {
            "m": pa.array(values, pa.struct([("role", pa.string()), ("n", pa.int64())])),
            "id": pa.array([0, 1, 2], pa.int64()),
        }
    )
    buffer, sizes = BatchEncoder({"m": "json", "id": "int64"}).encode(batch)
    expected = writer_bytes(
        tmp_path, {"m": "json", "id": "int64"}, [{"m": value, "id": i} for i, value in enumerate(values)]
    )
    assert split_samples(buffer, sizes) == expected


def test_missing_column_and_empty_batch():
    encoder = BatchEncoder({"x": "int64"})
    buffer, sizes = encoder.encode(pa.RecordBatch.from_pydict({"x": pa.array([], pa.int64())}))
    assert len(buffer) == 0 and len(sizes) == 0
    with pytest.raises(KeyError, match="no column 'x'"):
        encoder.encode(pa.RecordBatch.from_pydict({"y": pa.array([1])}))


def test_null_masks_store_the_zero_value_and_a_uint8_mask(tmp_path):
    batch = pa.RecordBatch.from_pydict(
        {
            "n": pa.array([3, None], pa.int32()),
            "s": pa.array([None, "x"]),
            "d": pa.array([None, Decimal("1.50")], pa.decimal128(5, 2)),
            "t": pa.array([None, datetime.date(1970, 1, 2)], pa.date32()),
        }
    )
    values = {"n": "int32", "s": "str", "d": "str_decimal", "t": "int32"}
    masks = {name: f"{name}__is_null" for name in values}
    columns = {**values, **dict.fromkeys(masks.values(), "uint8")}
    buffer, sizes = BatchEncoder(columns, nulls=masks).encode(batch)
    expected = [
        {"n": 3, "s": "", "d": Decimal("0.00"), "t": 0},
        {"n": 0, "s": "x", "d": Decimal("1.50"), "t": 1},
    ]
    nulls = [{"n": 0, "s": 1, "d": 1, "t": 1}, {"n": 1, "s": 0, "d": 0, "t": 0}]
    full = [{**sample, **{masks[name]: flag for name, flag in null.items()}} for sample, null in zip(expected, nulls)]
    assert split_samples(buffer, sizes) == writer_bytes(tmp_path, columns, full)
