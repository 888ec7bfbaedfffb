"""MDS, JSON and XSV column encodings: byte layouts, round trips, errors, custom registration, reference data."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from decimal import Decimal
from io import BytesIO

import numpy as np
import pytest
import xxhash
from PIL import Image

from streaming.format.json.encodings import get_json_encodings, is_json_encoded, is_json_encoding
from streaming.format.mds import encodings as mds
from streaming.format.mds.encodings import (
    Encoding,
    get_mds_coder,
    get_mds_encoded_size,
    get_mds_encodings,
    is_mds_encoding,
    is_mds_encoding_safe,
    mds_decode,
    mds_encode,
    register_mds_encoding,
)
from streaming.format.xsv.encodings import get_xsv_encodings, is_xsv_encoding, xsv_decode, xsv_encode
from tests.helpers import assert_same_value, load_fixture_pickle

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "formats", "mds_all_encodings")
IMAGE_ENCODINGS = {"pil", "jpeg", "png", "jpeg_array", "list[pil]", "list[jpeg]", "list[png]"}
NDARRAY_DTYPES = [
    "uint8",
    "int8",
    "uint16",
    "int16",
    "float16",
    "uint32",
    "int32",
    "float32",
    "uint64",
    "int64",
    "float64",
]
SCALARS = {
    "uint8": (np.uint8, 1),
    "uint16": (np.uint16, 2),
    "uint32": (np.uint32, 4),
    "uint64": (np.uint64, 8),
    "int8": (np.int8, 1),
    "int16": (np.int16, 2),
    "int32": (np.int32, 4),
    "int64": (np.int64, 8),
    "float16": (np.float16, 2),
    "float32": (np.float32, 4),
    "float64": (np.float64, 8),
}


def _image(mode: str, size: tuple[int, int] = (7, 5), seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    channels = len(Image.new(mode, (1, 1)).getbands())
    pixels = rng.integers(0, 256, (size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(pixels[:, :, 0] if channels == 1 else pixels).convert(mode)


def _jpeg_bytes(image: Image.Image) -> bytes:
    out = BytesIO()
    image.save(out, format="JPEG")
    return out.getvalue()


def _assert_same_image(ours, ref) -> None:
    assert ours.mode == ref.mode
    assert ours.size == ref.size
    assert ours.tobytes() == ref.tobytes()


@pytest.fixture
def registry():
    """Restore the encoding registry and the unsafe set after a test that changes them."""
    saved = dict(mds._encodings)
    unsafe = set(mds._unsafe_encodings)
    yield mds._encodings
    mds._encodings.clear()
    mds._encodings.update(saved)
    mds._unsafe_encodings.clear()
    mds._unsafe_encodings.update(unsafe)


# ---------------------------------------------------------------- names and lookups


def test_the_28_upstream_names():
    assert get_mds_encodings() == {
        "bytes",
        "str",
        "int",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
        "str_int",
        "str_float",
        "str_decimal",
        "pil",
        "jpeg",
        "png",
        "jpeg_array",
        "jpegarray",
        "list[pil]",
        "list[jpeg]",
        "list[png]",
        "pkl",
        "json",
        "ndarray",
    }


@pytest.mark.parametrize(
    ("encoding", "size"),
    [
        ("bytes", None),
        ("str", None),
        ("int", 8),
        ("uint8", 1),
        ("uint16", 2),
        ("uint32", 4),
        ("uint64", 8),
        ("int8", 1),
        ("int16", 2),
        ("int32", 4),
        ("int64", 8),
        ("float16", 2),
        ("float32", 4),
        ("float64", 8),
        ("str_int", None),
        ("str_float", None),
        ("str_decimal", None),
        ("pil", None),
        ("jpeg", None),
        ("png", None),
        ("jpeg_array", None),
        ("jpegarray", None),
        ("list[pil]", None),
        ("list[jpeg]", None),
        ("list[png]", None),
        ("pkl", None),
        ("json", None),
        ("ndarray", None),
        ("ndarray:int16", None),
        ("ndarray:int16:3", 6),
        ("ndarray:float32:2,2", 16),
        ("ndarray:float64:3,4,5", 480),
        ("ndarray:", None),
    ],
)
def test_encoded_sizes(encoding, size):
    assert is_mds_encoding(encoding)
    assert get_mds_encoded_size(encoding) == size


@pytest.mark.parametrize(
    "encoding",
    [
        "foo",
        "foo:3",
        "",
        "INT",
        "list[str]",
        "ndarray::3",
        "ndarray:int16:",
        "ndarray:int16:0",
        "ndarray:int16:3,-1",
        "ndarray:int16:a",
        "ndarray:int16:3:4",
        "ndarray:bool",
        "ndarray:complex64",
        "ndarray:float",
        "int:3",
        "jpeg:90",
        None,
        5,
    ],
)
def test_invalid_encodings(encoding):
    assert not is_mds_encoding(encoding)
    with pytest.raises(ValueError):
        get_mds_coder(encoding)
    with pytest.raises(ValueError):
        mds_encode(encoding, b"x")
    with pytest.raises(ValueError):
        mds_decode(encoding, b"x")


def test_unknown_encoding_lists_the_valid_names():
    with pytest.raises(
        ValueError,
        match=r"^Unsupported encoding: foo:3. Valid encodings: bytes, float16, .*, "
        r"uint8 \(ndarray also as ndarray:<dtype>",
    ):
        get_mds_coder("foo:3")


@pytest.mark.parametrize(
    ("encoding", "message"),
    [
        ("ndarray::3", "a shape needs a dtype"),
        ("ndarray:int16:0", "at least 1"),
        ("ndarray:int16:a", "comma-separated integers"),
        ("ndarray:bool", "dtype must be one of uint8, int8, uint16"),
        ("ndarray:int16:3:4", "ndarray:<dtype>:<d1,d2,...>"),
        ("int:3", "takes no ':' configuration"),
    ],
)
def test_malformed_configuration_messages(encoding, message):
    with pytest.raises(ValueError, match=f"Invalid MDS encoding '{encoding}': .*{message}"):
        get_mds_coder(encoding)


def test_coders_are_cached_per_string():
    assert get_mds_coder("ndarray:int16:3,4") is get_mds_coder("ndarray:int16:3,4")
    coder = get_mds_coder("ndarray:int16:3,4")
    assert (coder.dtype, coder.shape, coder.size) == ("int16", (3, 4), 24)
    assert get_mds_coder("jpegarray") is not get_mds_coder("jpeg_array")
    assert type(get_mds_coder("jpegarray")) is type(get_mds_coder("jpeg_array"))


def test_safety():
    assert not is_mds_encoding_safe("pkl")
    for name in get_mds_encodings() - {"pkl"}:
        assert is_mds_encoding_safe(name)
    assert is_mds_encoding_safe("ndarray:int16:3")


def test_builtins_are_zero_copy():
    for name in get_mds_encodings():
        assert get_mds_coder(name).zero_copy
    assert not Encoding.zero_copy


# ---------------------------------------------------------------- fixed-width numbers


@pytest.mark.parametrize("name", SCALARS)
def test_scalar_round_trip_and_layout(name):
    kind, width = SCALARS[name]
    info = np.finfo(kind) if np.issubdtype(kind, np.floating) else np.iinfo(kind)
    for value in (info.min, info.max, 0, 1):
        python_value = float(value) if np.issubdtype(kind, np.floating) else int(value)
        data = mds_encode(name, python_value)
        assert data == kind(value).tobytes()
        assert len(data) == width
        decoded = mds_decode(name, data)
        assert type(decoded) is kind
        assert decoded == kind(value)
        assert mds_decode(name, memoryview(data)) == decoded


@pytest.mark.parametrize("name", SCALARS)
def test_scalar_encoding_matches_numpy_for_any_numeric_input(name):
    kind, _ = SCALARS[name]
    rng = np.random.default_rng(1)
    if np.issubdtype(kind, np.floating):
        values = [float(x) for x in rng.normal(0, 1000, 50)] + [1e-8, 3.3e-5, 65519.0, 1e300, 0.1, -0.0]
        values += [np.float64(2.5), np.float32(1.1), 7, True, "1.5"]
    else:
        info = np.iinfo(kind)
        values = [
            int(x)
            for x in rng.integers(info.min, info.max, 50, dtype=np.int64 if info.min < 0 else np.uint64, endpoint=True)
        ]
        values += [np.int8(-3) if info.min < 0 else np.uint8(3), True, 3.9, "42"]
    with np.errstate(over="ignore"):
        for value in values:
            assert mds_encode(name, value) == kind(value).tobytes(), value


def test_float_special_values():
    for name in ("float16", "float32", "float64"):
        kind, _ = SCALARS[name]
        for value in (float("inf"), float("-inf")):
            assert mds_decode(name, mds_encode(name, value)) == kind(value)
        assert np.isnan(mds_decode(name, mds_encode(name, float("nan"))))
    signalling = bytes.fromhex("0100807f")  # a float32 NaN with payload 1
    assert mds_decode("float32", signalling).tobytes() == signalling
    with np.errstate(over="ignore"):
        assert mds_encode("float16", 1e6) == np.float16(np.inf).tobytes()


def test_signed_numpy_values_wrap_into_unsigned_columns():
    assert mds_encode("uint8", np.int8(-1)) == b"\xff"
    assert mds_encode("uint16", np.int16(-2)) == b"\xfe\xff"


def test_scalar_type_errors():
    with pytest.raises(TypeError, match="int32 expects a number, got str 'abc'"):
        mds_encode("int32", "abc")
    with pytest.raises(TypeError, match="int16 expects a single number, got list of shape \\(2,\\)"):
        mds_encode("int16", [1, 2])
    with pytest.raises(OverflowError):
        mds_encode("int8", 300)


def test_int_is_python_int_only():
    assert mds_encode("int", 7) == bytes.fromhex("0700000000000000")
    assert mds_encode("int", -1) == b"\xff" * 8
    assert mds_encode("int", True) == bytes.fromhex("0100000000000000")
    decoded = mds_decode("int", mds_encode("int", -(2**63)))
    assert type(decoded) is int and decoded == -(2**63)
    assert mds_decode("int", memoryview(mds_encode("int", 2**63 - 1))) == 2**63 - 1
    with pytest.raises(TypeError, match="int expects a Python int, got numpy.int64"):
        mds_encode("int", np.int64(3))
    with pytest.raises(TypeError, match="got float 1.5"):
        mds_encode("int", 1.5)
    with pytest.raises(OverflowError, match="64-bit"):
        mds_encode("int", 2**63)


# ---------------------------------------------------------------- text and generic values


@pytest.mark.parametrize(
    ("encoding", "value", "hex_bytes"),
    [
        ("bytes", b"\x00\x01", "0001"),
        ("str", "hi", "6869"),
        ("str", "š5ƣ", "c5a135c6a3"),
        ("str_int", -364936045, "2d333634393336303435"),
        ("str_int", 10**30, "31" + "30" * 30),
        ("str_float", 1.25, "312e3235"),
        ("str_float", -1170.0235040456212, "2d313137302e30323335303430343536323132"),
        ("str_decimal", Decimal("1.10"), "312e3130"),
        ("json", {"k": 0, "v": [1.5, "x", None, True]}, b'{"k": 0, "v": [1.5, "x", null, true]}'.hex()),
    ],
)
def test_text_layouts_and_round_trip(encoding, value, hex_bytes):
    data = mds_encode(encoding, value)
    assert data.hex() == hex_bytes
    decoded = mds_decode(encoding, data)
    assert type(decoded) is type(value)
    assert decoded == value
    assert mds_decode(encoding, memoryview(data)) == value


def test_bytes_decode_returns_bytes_from_a_memoryview():
    decoded = mds_decode("bytes", memoryview(b"abc"))
    assert type(decoded) is bytes and decoded == b"abc"
    assert mds_encode("bytes", bytearray(b"ab")) == b"ab"


def test_str_int_writes_bools_as_digits():
    assert mds_encode("str_int", True) == b"1"
    assert mds_decode("str_int", b"1") == 1


def test_json_stores_ndarrays_as_lists():
    assert mds_encode("json", np.arange(3)) == b"[0, 1, 2]"
    assert mds_decode("json", b"[0, 1, 2]") == [0, 1, 2]


def test_pickle_protocol_4_round_trip():
    value = {"a": [1, 2, (3, 4)], "b": Decimal("2.5"), "c": np.arange(3)}
    data = mds_encode("pkl", value)
    assert data[:2] == b"\x80\x04"
    decoded = mds_decode("pkl", memoryview(data))
    assert decoded["a"] == value["a"] and decoded["b"] == value["b"]
    assert np.array_equal(decoded["c"], value["c"])


@pytest.mark.parametrize(
    ("encoding", "value", "message"),
    [
        ("bytes", "abc", "bytes expects bytes, got str"),
        ("str", 5, "str expects a str, got int"),
        ("str_int", np.int64(5), "str_int expects a Python int, got numpy.int64"),
        ("str_float", 5, "str_float expects a Python float, got int"),
        ("str_decimal", 1.5, "str_decimal expects a decimal.Decimal, got float"),
        ("json", {1, 2}, "json expects a JSON-serialisable value, got set"),
        ("json", np.int64(1), "json expects a JSON-serialisable value, got numpy.int64"),
    ],
)
def test_type_errors_name_expected_and_got(encoding, value, message):
    with pytest.raises(TypeError, match=message):
        get_mds_coder(encoding).encode(value)


def test_bytes_pass_through_every_encoding():
    for name in sorted(get_mds_encodings()) + ["ndarray:int16:3"]:
        assert mds_encode(name, b"\x01\x02") == b"\x01\x02"


# ---------------------------------------------------------------- images


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA"])
def test_pil_layout_and_round_trip(mode):
    image = _image(mode)
    data = mds_encode("pil", image)
    assert data[:12] == struct.pack("<3I", 7, 5, len(mode))
    assert data[12 : 12 + len(mode)] == mode.encode()
    assert data[12 + len(mode) :] == image.tobytes()
    for payload in (data, memoryview(data)):
        decoded = mds_decode("pil", payload)
        assert isinstance(decoded, Image.Image)
        _assert_same_image(decoded, image)


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA"])
def test_png_round_trip(mode):
    image = _image(mode)
    data = mds_encode("png", image)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    for payload in (data, memoryview(data)):
        decoded = mds_decode("png", payload)
        assert decoded.format == "PNG"
        _assert_same_image(decoded, image)


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_jpeg_round_trip(mode):
    image = _image(mode, (16, 16)).resize((16, 16))
    data = mds_encode("jpeg", image)
    assert data == _jpeg_bytes(image)
    decoded = mds_decode("jpeg", memoryview(data))
    assert decoded.format == "JPEG"
    assert (decoded.mode, decoded.size) == (mode, (16, 16))


def test_jpeg_copies_the_source_file_while_it_exists(tmp_path):
    path = tmp_path / "photo.jpg"
    _image("RGB", (8, 8)).save(path, format="JPEG", quality=95)
    original = path.read_bytes()
    with Image.open(path) as opened:
        assert mds_encode("jpeg", opened) == original
        assert original != _jpeg_bytes(opened)
        path.unlink()
        assert mds_encode("jpeg", opened) == _jpeg_bytes(opened)


def test_jpeg_rejects_modes_it_cannot_store():
    with pytest.raises(ValueError, match="jpeg cannot store a RGBA image"):
        mds_encode("jpeg", _image("RGBA"))


@pytest.mark.parametrize("encoding", ["pil", "jpeg", "png"])
def test_images_must_be_pil(encoding):
    with pytest.raises(TypeError, match=f"{encoding} expects a PIL.Image.Image, got numpy.ndarray"):
        mds_encode(encoding, np.zeros((2, 2), np.uint8))


@pytest.mark.parametrize(("encoding", "item"), [("list[pil]", "pil"), ("list[png]", "png"), ("list[jpeg]", "jpeg")])
def test_image_list_layout_and_round_trip(encoding, item):
    images = [_image("RGB", (4, 3), seed) for seed in range(3)]
    data = mds_encode(encoding, images)
    parts = [mds_encode(item, image) for image in images]
    assert data == struct.pack("<5I", 0, 3, *map(len, parts)) + b"".join(parts)
    decoded = mds_decode(encoding, memoryview(data))
    assert isinstance(decoded, list) and len(decoded) == 3
    for ours, image, part in zip(decoded, images, parts):
        _assert_same_image(ours, mds_decode(item, part))
        if item != "jpeg":
            _assert_same_image(ours, image)


def test_image_list_empty_and_errors():
    assert mds_encode("list[png]", []) == bytes(8)
    assert mds_decode("list[png]", bytes(8)) == []
    with pytest.raises(TypeError, match=r"list\[png\] expects a list of PIL images, got PIL.Image.Image"):
        mds_encode("list[png]", _image("L"))
    with pytest.raises(TypeError, match=r"list\[pil\] item 1: pil expects a PIL.Image.Image, got str"):
        mds_encode("list[pil]", [_image("L"), "x"])
    with pytest.raises(ValueError, match="header describes"):
        mds_decode("list[pil]", struct.pack("<3I", 0, 1, 50) + b"short")


@pytest.mark.parametrize("encoding", ["jpeg_array", "jpegarray"])
def test_jpeg_array_layout_and_round_trip(encoding):
    images = [_image("RGB", (8, 8), seed) for seed in range(2)]
    files = [_jpeg_bytes(image) for image in images]
    data = mds_encode(encoding, files)
    assert data == struct.pack("<3I", 2, *map(len, files)) + b"".join(files)
    assert mds_encode(encoding, (bytearray(files[0]), memoryview(files[1]))) == data
    decoded = mds_decode(encoding, memoryview(data))
    assert [image.format for image in decoded] == ["JPEG", "JPEG"]
    for ours, jpeg in zip(decoded, files):
        _assert_same_image(ours, Image.open(BytesIO(jpeg)))


def test_jpeg_array_errors():
    with pytest.raises(ValueError, match="at least one JPEG"):
        mds_encode("jpeg_array", [])
    with pytest.raises(TypeError, match="jpeg_array expects JPEG bytes, got PIL.Image.Image at index 0"):
        mds_encode("jpeg_array", [_image("RGB")])
    with pytest.raises(TypeError, match="jpeg_array expects a list of JPEG bytes, got str"):
        mds_encode("jpeg_array", "abc")
    with pytest.raises(ValueError, match="too short"):
        mds_decode("jpeg_array", b"\x01\x00")
    with pytest.raises(ValueError, match="holds no images"):
        mds_decode("jpeg_array", bytes(4))


# ---------------------------------------------------------------- ndarray


@pytest.mark.parametrize("dtype", NDARRAY_DTYPES)
@pytest.mark.parametrize("form", ["dynamic", "static dtype", "static dtype and shape"])
def test_ndarray_round_trip(dtype, form):
    array = (np.arange(24) % 100).astype(dtype).reshape(2, 3, 4)
    encoding = {
        "dynamic": "ndarray",
        "static dtype": f"ndarray:{dtype}",
        "static dtype and shape": f"ndarray:{dtype}:2,3,4",
    }[form]
    data = mds_encode(encoding, array)
    header = {"dynamic": 2 + 3, "static dtype": 1 + 3, "static dtype and shape": 0}[form]
    assert len(data) == header + array.nbytes
    assert data[header:] == array.tobytes()
    if form == "dynamic":
        assert data[0] == mds.NDARRAY_DTYPE_CODES[dtype]
    for payload in (data, memoryview(data), memoryview(bytearray(data))):
        decoded = mds_decode(encoding, payload)
        assert decoded.dtype == np.dtype(dtype)
        assert decoded.shape == (2, 3, 4)
        assert np.array_equal(decoded, array)
        assert not decoded.flags.writeable


def test_ndarray_verified_examples():
    assert mds_encode("ndarray", np.arange(6, dtype=np.int16).reshape(2, 3)).hex() == "11080203000001000200030004000500"
    assert mds_encode("ndarray:int16", np.arange(3, dtype=np.int16)).hex() == "0403000001000200"
    assert mds_encode("ndarray:int16:3", np.arange(3, dtype=np.int16)).hex() == "000001000200"
    assert len(mds_encode("ndarray:float32:2,2", np.ones((2, 2), np.float32))) == 16


@pytest.mark.parametrize(
    ("shape", "width_code", "width"),
    [((3, 255), 0, 1), ((256,), 1, 2), ((2, 65535), 1, 2), ((65536,), 2, 4), ((1, 70000), 2, 4)],
)
def test_ndarray_shape_width_selection(shape, width_code, width):
    array = np.zeros(shape, np.uint8)
    data = mds_encode("ndarray:uint8", array)
    assert data[0] == len(shape) << 2 | width_code
    assert data[1 : 1 + width * len(shape)] == np.array(shape, f"<u{width}").tobytes()
    assert mds_decode("ndarray:uint8", data).shape == shape


def test_ndarray_decodes_64_bit_shapes():
    assert mds._shape_width_code(2**32 - 1) == 2
    assert mds._shape_width_code(2**32) == 3
    data = bytes((2 << 2 | 3,)) + np.array([1, 2], "<u8").tobytes() + np.array([5, 6], "<i2").tobytes()
    decoded = mds_decode("ndarray:int16", data)
    assert decoded.shape == (1, 2) and decoded.tolist() == [[5, 6]]


def test_ndarray_is_a_zero_copy_view():
    data = mds_encode("ndarray", np.arange(1000, dtype=np.int64))
    decoded = mds_decode("ndarray", data)
    assert np.shares_memory(decoded, np.frombuffer(data, np.uint8))
    buffer = bytearray(data)
    view = mds_decode("ndarray", memoryview(buffer))
    buffer[-8:] = np.int64(-5).tobytes()
    assert view[-1] == -5
    with pytest.raises(ValueError):
        view[0] = 1


def test_ndarray_any_memory_layout_is_stored_in_c_order():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    for variant in (array.T, np.asfortranarray(array), array[:, ::2]):
        assert np.array_equal(mds_decode("ndarray", mds_encode("ndarray", variant)), variant)


def test_ndarray_big_endian_is_stored_little_endian():
    array = np.arange(5, dtype=">i4")
    assert mds_encode("ndarray", array) == mds_encode("ndarray", array.astype("<i4"))
    assert mds_encode("ndarray:int32:5", array) == array.astype("<i4").tobytes()


@pytest.mark.parametrize(
    ("encoding", "value", "error", "message"),
    [
        ("ndarray", np.array(5, np.int32), ValueError, "0-d array"),
        ("ndarray:int32", np.array(5, np.int32), ValueError, "0-d array"),
        ("ndarray", np.zeros((0, 3), np.int32), ValueError, r"empty array \(shape \(0, 3\)\)"),
        ("ndarray", np.array([True]), ValueError, "cannot store dtype bool; supported dtypes: uint8, int8"),
        ("ndarray", np.array([1j]), ValueError, "cannot store dtype complex128"),
        ("ndarray", np.array(["a"]), ValueError, "cannot store dtype <U1"),
        ("ndarray:int16", np.arange(3, dtype=np.int32), ValueError, "ndarray:int16 expects dtype int16, got int32"),
        (
            "ndarray:int16:3",
            np.arange(4, dtype=np.int16),
            ValueError,
            r"ndarray:int16:3 expects shape \(3,\), got \(4,\)",
        ),
        ("ndarray:int16:3", np.array(5, np.int16), ValueError, r"expects shape \(3,\), got \(\)"),
        ("ndarray", [1, 2], TypeError, "ndarray expects a numpy.ndarray, got list"),
        # numpy 1.x (the runtimes of Spark 3.5) makes no array of more than 32 dimensions.
        *(
            [("ndarray", np.zeros((1,) * 64, np.uint8), ValueError, "at most 63 dimensions, got 64")]
            if np.lib.NumpyVersion(np.__version__) >= "2.0.0"
            else []
        ),
    ],
)
def test_ndarray_errors(encoding, value, error, message):
    with pytest.raises(error, match=message):
        mds_encode(encoding, value)


def test_ndarray_unknown_dtype_code_on_decode():
    with pytest.raises(ValueError, match="unknown dtype code 1"):
        mds_decode("ndarray", b"\x01\x04\x01\x00")


def test_ndarray_constructor_validates():
    assert mds.NDArray("int8", (2, 2)).size == 4
    with pytest.raises(ValueError, match="dtype must be one of"):
        mds.NDArray("bool")
    with pytest.raises(ValueError, match="at least 1"):
        mds.NDArray("int8", (2, 0))


# ---------------------------------------------------------------- custom encodings


class MyInt(Encoding):
    size = 4

    def encode(self, obj) -> bytes:
        self._validate(obj, int)
        return struct.pack("<i", obj)

    def decode(self, data: bytes):
        assert type(data) is bytes
        return struct.unpack("<i", data)[0]


class Scaled(Encoding):
    def __init__(self, factor: int = 1) -> None:
        self.factor = factor

    @classmethod
    def from_str(cls, config: str) -> Scaled:
        return cls(int(config))

    def encode(self, obj) -> bytes:
        return str(obj * self.factor).encode()

    def decode(self, data: bytes):
        return int(data) // self.factor


def test_register_custom_encoding(registry):
    register_mds_encoding("myint", MyInt)
    assert "myint" in get_mds_encodings()
    assert is_mds_encoding("myint") and is_mds_encoding_safe("myint")
    assert get_mds_encoded_size("myint") == 4
    assert mds_encode("myint", 7) == b"\x07\x00\x00\x00"
    assert mds_decode("myint", memoryview(b"\x07\x00\x00\x00")) == 7
    assert not get_mds_coder("myint").zero_copy
    with pytest.raises(TypeError, match="expected <class 'int'>, got str"):
        mds_encode("myint", "7")


def test_register_unsafe_encoding(registry):
    register_mds_encoding("risky", MyInt, safe=False)
    assert not is_mds_encoding_safe("risky")
    register_mds_encoding("risky", MyInt)
    assert is_mds_encoding_safe("risky")


def test_upstream_style_registration(registry):
    mds._encodings["myint"] = MyInt
    assert is_mds_encoding("myint")
    assert mds_decode("myint", mds_encode("myint", -3)) == -3
    mds._unsafe_encodings.add("myint")
    assert not is_mds_encoding_safe("myint")


def test_replacing_an_encoding_drops_the_cached_coder(registry):
    mds._encodings["custom"] = MyInt
    assert isinstance(get_mds_coder("custom"), MyInt)
    mds._encodings["custom"] = Scaled
    assert isinstance(get_mds_coder("custom"), Scaled)
    del mds._encodings["custom"]
    assert not is_mds_encoding("custom")
    mds._encodings.update(custom=MyInt)
    assert isinstance(get_mds_coder("custom"), MyInt)


def test_custom_encoding_with_configuration(registry):
    register_mds_encoding("scaled", Scaled)
    assert mds_encode("scaled:10", 4) == b"40"
    assert mds_decode("scaled:10", b"40") == 4
    assert mds_encode("scaled", 4) == b"4"
    assert not is_mds_encoding("scaled:x")


def test_register_validates_its_arguments(registry):
    with pytest.raises(ValueError, match="without ':'"):
        register_mds_encoding("my:int", MyInt)
    with pytest.raises(ValueError, match="non-empty"):
        register_mds_encoding("", MyInt)
    with pytest.raises(TypeError, match="must be a subclass of streaming.format.mds.encodings.Encoding"):
        register_mds_encoding("myint", int)
    mds._encodings["broken"] = dict
    assert not is_mds_encoding("broken")
    with pytest.raises(TypeError, match="not a subclass"):
        get_mds_coder("broken")


# ---------------------------------------------------------------- reference data


def _reference_samples() -> list[dict[str, tuple[str, memoryview]]]:
    """Parse every shard of the reference dataset: per sample, column name -> (encoding, value bytes)."""
    with open(os.path.join(REFERENCE, "index.json")) as file:
        index = json.load(file)
    samples = []
    for shard in index["shards"]:
        with open(os.path.join(REFERENCE, shard["raw_data"]["basename"]), "rb") as file:
            data = memoryview(file.read())
        count = struct.unpack_from("<I", data, 0)[0]
        offsets = struct.unpack_from(f"<{count + 1}I", data, 4)
        sizes = shard["column_sizes"]
        num_variable = sum(size is None for size in sizes)
        for begin, end in zip(offsets, offsets[1:]):
            sample = data[begin:end]
            variable = iter(struct.unpack_from(f"<{num_variable}I", sample, 0))
            position = 4 * num_variable
            columns = {}
            for name, encoding, size in zip(shard["column_names"], shard["column_encodings"], sizes):
                size = next(variable) if size is None else size
                columns[name] = (encoding, sample[position : position + size])
                position += size
            assert position == len(sample)
            samples.append(columns)
    return samples


@pytest.fixture(scope="module")
def reference():
    inputs = load_fixture_pickle(os.path.join(REFERENCE, "inputs.pkl"))
    decoded = load_fixture_pickle(os.path.join(REFERENCE, "decoded.pkl"))
    return _reference_samples(), inputs, decoded


def test_reference_covers_every_encoding(reference):
    samples, inputs, decoded = reference
    assert len(samples) == len(inputs) == len(decoded) == 40
    encodings = {encoding for encoding, _ in samples[0].values()}
    assert {name.partition(":")[0] for name in encodings} == get_mds_encodings() - {"jpegarray"}


def test_reference_decodes_like_upstream(reference):
    samples, _, decoded = reference
    for index, (sample, expected) in enumerate(zip(samples, decoded)):
        assert set(sample) == set(expected), index
        for name, (encoding, data) in sample.items():
            assert_same_value(mds_decode(encoding, data), expected[name])
            assert_same_value(mds_decode(encoding, bytes(data)), expected[name])


def test_reference_encodes_like_upstream(reference):
    samples, inputs, _ = reference
    for sample, values in zip(samples, inputs):
        for name, (encoding, data) in sample.items():
            ours = mds_encode(encoding, values[name])
            if encoding in IMAGE_ENCODINGS - {"pil", "list[pil]", "jpeg_array"}:
                assert_same_value(mds_decode(encoding, ours), mds_decode(encoding, data))
            else:
                assert ours == data, (name, encoding)


def test_worked_example_shard_bytes_and_hashes():
    header = json.dumps(
        {
            "column_encodings": ["int", "str"],
            "column_names": ["number", "words"],
            "column_sizes": [8, None],
            "compression": None,
            "format": "mds",
            "hashes": ["sha1", "xxh64"],
            "size_limit": 67108864,
            "version": 2,
        },
        sort_keys=True,
    ).encode()
    samples = [
        struct.pack("<I", len(mds_encode("str", words))) + mds_encode("int", number) + mds_encode("str", words)
        for number, words in ((7, "hi"), (-1, "abc"))
    ]
    first = 4 + 4 * 3 + len(header)
    offsets = [first, first + len(samples[0]), first + len(samples[0]) + len(samples[1])]
    shard = struct.pack("<4I", 2, *offsets) + header + b"".join(samples)
    assert len(shard) == 250
    assert shard[221:].hex() == "020000000700000000000000686903000000ffffffffffffffff616263"
    assert hashlib.sha1(shard).hexdigest() == "8a6770da95458fcff44f7ee005db25f155890174"
    assert xxhash.xxh64_hexdigest(shard) == "772598b0f4615b7b"


def test_import_is_light():
    code = (
        "import sys, streaming.format.mds.encodings; "
        "print(sorted(m for m in ('PIL', 'torch', 'pyspark') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------- JSON and XSV


def test_json_encodings():
    assert get_json_encodings() == {"str", "int", "float"}
    assert is_json_encoding("int") and not is_json_encoding("bytes") and not is_json_encoding(None)
    assert is_json_encoded("str", "a") and not is_json_encoded("str", 1)
    assert is_json_encoded("int", 3) and is_json_encoded("int", True) and not is_json_encoded("int", 3.0)
    assert is_json_encoded("float", 3.0) and not is_json_encoded("float", 3)
    with pytest.raises(ValueError, match="Unknown JSON encoding 'bytes'. Valid encodings: str, int, float"):
        is_json_encoded("bytes", b"")


def test_xsv_encodings():
    assert get_xsv_encodings() == {"str", "int", "float"}
    assert is_xsv_encoding("float") and not is_xsv_encoding("json")
    assert xsv_encode("str", "a b") == "a b"
    assert xsv_encode("int", -12) == "-12"
    assert xsv_encode("int", True) == "1"
    assert xsv_encode("float", 0.1) == "0.1"
    assert xsv_encode("float", np.float64(2.5)) == "2.5"
    assert xsv_decode("str", "x") == "x"
    assert xsv_decode("int", "-12") == -12 and type(xsv_decode("int", "7")) is int
    assert xsv_decode("float", "0.1") == 0.1
    with pytest.raises(TypeError, match="XSV encoding 'int' expects a int, got float 1.5"):
        xsv_encode("int", 1.5)
    with pytest.raises(TypeError, match="expects a str, got int"):
        xsv_encode("str", 1)
    with pytest.raises(ValueError, match="Unknown XSV encoding 'bytes'. Valid encodings: str, int, float"):
        xsv_encode("bytes", b"")
    with pytest.raises(ValueError, match="Unknown XSV encoding"):
        xsv_decode("bytes", "")
    with pytest.raises(ValueError):
        xsv_decode("int", "1.5")
