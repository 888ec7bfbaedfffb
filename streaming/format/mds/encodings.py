"""MDS column encodings: how one column value becomes bytes in a shard, and back.

Every encoding of MosaicML Streaming is here with the same byte layout, under the same name. An encoding
string is a name, optionally followed by ``:`` and a configuration that only ``ndarray`` accepts
(``ndarray:int16:3,4``).

Custom encodings
    Subclass :class:`Encoding` (set ``size`` when every value encodes to the same number of bytes) and
    register it with :func:`register_mds_encoding`. MosaicML Streaming's way also works, because the
    registry is the module-level dict ``_encodings`` (name → class)::

        _encodings["myint"] = MyInt

    A registered class is instantiated with no arguments; one that accepts a configuration
    (``"myenc:..."``) implements the classmethod ``from_str(text)``. Instances are cached and shared
    between threads, so ``encode``/``decode`` must not keep per-call state.

Differences from MosaicML Streaming, on purpose
    * Unknown or malformed encoding strings raise ``ValueError`` listing the valid names, where upstream
      raised ``KeyError``, ``AttributeError`` or ``AssertionError``; :func:`is_mds_encoding` returns
      ``False`` for them instead of raising.
    * Values of the wrong type raise ``EncodingTypeError``, both a ``TypeError`` and upstream's
      ``AttributeError`` (its message begins with upstream's words), e.g. a ``numpy.int64``
      given to ``int``, which takes Python ``int``/``bool`` only, as upstream.
    * ``str_int`` writes ``True`` as ``1`` (upstream wrote ``True``, which it could not read back).
    * ``ndarray`` also accepts big-endian arrays (stored little-endian); upstream wrote their bytes as is.
    * ``jpeg_array`` refuses an empty sequence when writing, since no reader can decode an empty one.
    * ``pkl`` always pickles with protocol 4 (the default up to Python 3.13), so bytes do not change with
      the Python version.

Fast paths
    Built-in coders decode a ``bytes`` or a ``memoryview`` (they set ``zero_copy = True``); ``ndarray``
    returns a read-only array over the given buffer without copying, so it keeps that buffer alive.
    Custom encodings get ``bytes`` unless they set ``zero_copy = True`` themselves.
    :func:`mds_encode` returns ``bytes`` values unchanged for every encoding (upstream behaviour that
    Spark conversion relies on); ``get_mds_coder(...).encode`` does not, so callers of the coder that
    want that behaviour check for ``bytes`` first.

PIL is imported only by the image encodings; torch and pyspark never.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from decimal import Decimal
from functools import cache
from io import BytesIO
from types import ModuleType
from typing import Any, Protocol, TypeGuard

import numpy as np

from streaming.format.errors import (
    EncodingTypeError,
    EncodingValueError,
    MalformedEncodingError,
    ScalarShapeError,
    UnknownDtypeCodeError,
)

__all__ = [
    "JPEG",
    "JSON",
    "PIL",
    "PNG",
    "Bytes",
    "Encoding",
    "Float16",
    "Float32",
    "Float64",
    "Int",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "JPEGArray",
    "JPEGList",
    "List",
    "NDArray",
    "PILList",
    "PNGList",
    "Pickle",
    "Scalar",
    "Str",
    "StrDecimal",
    "StrEncoding",
    "StrFloat",
    "StrInt",
    "UInt8",
    "UInt16",
    "UInt32",
    "UInt64",
    "get_mds_coder",
    "get_mds_encoded_size",
    "get_mds_encodings",
    "is_mds_encoding",
    "is_mds_encoding_safe",
    "mds_decode",
    "mds_encode",
    "register_mds_encoding",
    "value_decoder",
]

_U32 = struct.Struct("<I")
_INT64 = struct.Struct("<q")
_PIL_HEADER = struct.Struct("<3I")
_LIST_HEADER = struct.Struct("<2I")
_PICKLE_PROTOCOL = 4


def _describe(obj: Any) -> str:
    """Name an object's type for error messages: ``int``, ``numpy.int64``, ``PIL.Image.Image``."""
    kind = type(obj)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


class Encoding(ABC):
    """Convert values of one type to bytes and back.

    Attributes:
        size: the number of bytes every encoded value has, or ``None`` when it varies.
        zero_copy: whether ``decode`` accepts a ``memoryview`` as well as ``bytes``.
    """

    size: int | None = None
    zero_copy: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass of a built-in coder that overrides `decode` is handed `bytes`, as upstream's coders always
        # were, unless it declares that it takes a memoryview too.
        if "decode" in cls.__dict__ and "zero_copy" not in cls.__dict__:
            cls.zero_copy = False

    @abstractmethod
    def encode(self, obj: Any) -> bytes:
        """Return the bytes of ``obj``; raise ``TypeError``/``ValueError`` naming what was expected and got."""

    @abstractmethod
    def decode(self, data: bytes) -> Any:
        """Return the value that ``encode`` turned into ``data``."""

    @classmethod
    def from_str(cls, text: str) -> Encoding:
        """Build a coder from the configuration after the first ``:`` of the encoding string.

        Only encodings that take a configuration override this; the default refuses one.
        """
        raise ValueError(f"this encoding takes no ':' configuration, got {text!r}")

    @staticmethod
    def _validate(obj: Any, expected_type: type | tuple[type, ...]) -> None:
        """Raise ``TypeError`` unless ``obj`` is an instance of ``expected_type`` (helper for subclasses)."""
        if not isinstance(obj, expected_type):
            raise EncodingTypeError(
                f"data should be of type {expected_type}, but instead, found as {type(obj)}: expected "
                f"{expected_type}, got {_describe(obj)} {obj!r:.80}"
            )


class ViewDecoder(Protocol):
    """A coder whose ``decode`` takes a ``memoryview`` as well as ``bytes`` (one with ``zero_copy = True``)."""

    def decode(self, data: bytes | memoryview) -> Any: ...


def decodes_views(coder: Encoding) -> TypeGuard[ViewDecoder]:
    """Whether ``coder`` may be handed a slice of a shard's mmap instead of a private ``bytes`` copy."""
    return getattr(coder, "zero_copy", False)


class Bytes(Encoding):
    """``bytes``: stored as they are (``bytearray`` and ``memoryview`` are accepted too)."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, bytes):
            return obj
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise EncodingTypeError(
            f"data should be of type {bytes}, but instead, found as {type(obj)}: "
            f"bytes expects bytes, got {_describe(obj)} {obj!r:.80}"
        )

    def decode(self, data: bytes | memoryview) -> bytes:
        return bytes(data)


class Str(Encoding):
    """``str``: UTF-8 text."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, str):
            raise EncodingTypeError(
                f"data should be of type {str}, but instead, found as {type(obj)}: "
                f"str expects a str, got {_describe(obj)} {obj!r:.80}"
            )
        return obj.encode("utf-8")

    def decode(self, data: bytes | memoryview) -> str:
        if type(data) is bytes:
            return data.decode("utf-8")
        return str(data, "utf-8")


class Int(Encoding):
    """``int``: a Python ``int`` (or ``bool``) as int64 little-endian; decodes to a Python ``int``."""

    size = 8
    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, int):
            raise EncodingTypeError(
                f"data should be of type {int}, but instead, found as {type(obj)}: "
                f"int expects a Python int, got {_describe(obj)} {obj!r:.80}; convert it with "
                f"int(value) or declare the column as int64"
            )
        try:
            return _INT64.pack(obj)
        except struct.error:
            raise OverflowError(f"int stores 64-bit signed integers, got {obj}") from None

    def decode(self, data: bytes | memoryview) -> int:
        try:
            return _INT64.unpack(data)[0]
        except struct.error:
            # Not 8 bytes: upstream's numpy read decides (its first value, or its error).
            return int(np.frombuffer(data, np.int64)[0])

    def decode_at(self, buffer: memoryview, start: int, stop: int) -> int:
        """``decode(buffer[start:stop])`` without the slice."""
        if stop - start != _INT64.size:
            return self.decode(buffer[start:stop])
        return _INT64.unpack_from(buffer, start)[0]


# Numpy scalar kind and size -> the struct code that packs the same little-endian bytes.
_STRUCT_CODES = {("i", 1): "b", ("i", 2): "h", ("i", 4): "i", ("i", 8): "q", ("u", 1): "B", ("u", 2): "H"}
_STRUCT_CODES |= {("u", 4): "I", ("u", 8): "Q", ("f", 2): "e", ("f", 4): "f", ("f", 8): "d"}


class Scalar(Encoding):
    """A fixed-width numpy scalar, little-endian; decodes to the numpy scalar type.

    Python values of the matching kind (``int`` for integer types, ``float`` for float types) are packed
    with ``struct``, which gives the same bytes as numpy; everything else goes through numpy's conversion.

    Args:
        dtype: the numpy scalar type, e.g. ``numpy.int32`` (upstream's ``Scalar(np.int32)``).
    """

    zero_copy = True

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype
        self._dtype = np.dtype(dtype).newbyteorder("<")
        self._name = self._dtype.name
        self.size = self._dtype.itemsize
        code = _STRUCT_CODES.get((self._dtype.kind, self._dtype.itemsize))
        self._fast_type: type | None = None
        self._nan_aware = self._dtype.kind == "f"
        if code is not None:
            layout = struct.Struct("<" + code)
            self._pack = layout.pack
            self._unpack = layout.unpack
            self._fast_type = float if self._dtype.kind == "f" else int

    def encode(self, obj: Any) -> bytes:
        if type(obj) is self._fast_type:
            try:
                return self._pack(obj)
            except (struct.error, OverflowError):
                if self._fast_type is int:
                    # numpy 2's error; numpy 1.x (every Spark 3.5 runtime) would store the value wrapped around.
                    raise OverflowError(f"Python integer {obj} out of bounds for {self._name}") from None
        try:
            value = np.array(obj, dtype=self._dtype)
        except (TypeError, ValueError) as err:
            wrong = EncodingValueError if isinstance(err, ValueError) else TypeError
            raise wrong(f"{self._name} expects a number, got {_describe(obj)} {obj!r:.80} ({err})") from None
        if value.ndim:
            raise ScalarShapeError(f"{self._name} expects a single number, got {_describe(obj)} of shape {value.shape}")
        return value.tobytes()

    def decode(self, data: bytes | memoryview) -> Any:
        if self._fast_type is None:
            return np.frombuffer(data, self._dtype, 1)[0]
        try:
            value = self._unpack(data)[0]
        except struct.error:
            # Not one value's bytes: upstream's numpy read decides (its first value, or its error).
            return np.frombuffer(data, self._dtype)[0]
        if self._nan_aware and value != value:
            # Decoded by numpy so that the NaN's payload bits survive.
            return np.frombuffer(data, self._dtype, 1)[0]
        return self.dtype(value)


class UInt8(Scalar):
    """``uint8``."""

    def __init__(self) -> None:
        super().__init__(np.uint8)


class UInt16(Scalar):
    """``uint16``."""

    def __init__(self) -> None:
        super().__init__(np.uint16)


class UInt32(Scalar):
    """``uint32``."""

    def __init__(self) -> None:
        super().__init__(np.uint32)


class UInt64(Scalar):
    """``uint64``."""

    def __init__(self) -> None:
        super().__init__(np.uint64)


class Int8(Scalar):
    """``int8``."""

    def __init__(self) -> None:
        super().__init__(np.int8)


class Int16(Scalar):
    """``int16``."""

    def __init__(self) -> None:
        super().__init__(np.int16)


class Int32(Scalar):
    """``int32``."""

    def __init__(self) -> None:
        super().__init__(np.int32)


class Int64(Scalar):
    """``int64``."""

    def __init__(self) -> None:
        super().__init__(np.int64)


class Float16(Scalar):
    """``float16``."""

    def __init__(self) -> None:
        super().__init__(np.float16)


class Float32(Scalar):
    """``float32``."""

    def __init__(self) -> None:
        super().__init__(np.float32)


class Float64(Scalar):
    """``float64``."""

    def __init__(self) -> None:
        super().__init__(np.float64)


class StrEncoding(Encoding):
    """The base of the encodings that store a number as its text (upstream's class of the same name)."""


class StrInt(StrEncoding):
    """``str_int``: an ``int`` as its decimal digits (any size)."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, int):
            raise EncodingTypeError(
                f"data should be of type {int}, but instead, found as {type(obj)}: "
                f"str_int expects a Python int, got {_describe(obj)} {obj!r:.80}"
            )
        return int.__repr__(obj).encode("ascii")

    def decode(self, data: bytes | memoryview) -> int:
        return int(str(data, "utf-8"))  # as text: the digits of any script, as upstream reads them


class StrFloat(Encoding):
    """``str_float``: a ``float`` as its shortest round-trip text (``repr``)."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, float):
            raise EncodingTypeError(
                f"data should be of type {float}, but instead, found as {type(obj)}: "
                f"str_float expects a Python float, got {_describe(obj)} {obj!r:.80}"
            )
        return float.__repr__(obj).encode("ascii")

    def decode(self, data: bytes | memoryview) -> float:
        return float(str(data, "utf-8"))


class StrDecimal(Encoding):
    """``str_decimal``: a ``decimal.Decimal`` as its text (the scale is kept: ``1.10``)."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, Decimal):
            raise EncodingTypeError(
                f"data should be of type {Decimal}, but instead, found as {type(obj)}: "
                f"str_decimal expects a decimal.Decimal, got {_describe(obj)} {obj!r:.80}"
            )
        return str(obj).encode("ascii")

    def decode(self, data: bytes | memoryview) -> Decimal:
        return Decimal(str(data, "utf-8"))


class Pickle(Encoding):
    """``pkl``: any picklable value. Unsafe: decoding runs arbitrary code from the shard."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=_PICKLE_PROTOCOL)

    def decode(self, data: bytes | memoryview) -> Any:
        return pickle.loads(data)


class JSON(Encoding):
    """``json``: any JSON-serialisable value (an ndarray is stored as nested lists), UTF-8."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, np.ndarray):
            obj = obj.tolist()
        try:
            text = json.dumps(obj)
        except (TypeError, ValueError) as err:
            raise TypeError(f"json expects a JSON-serialisable value, got {_describe(obj)} ({err})") from None
        return text.encode("utf-8")

    def decode(self, data: bytes | memoryview) -> Any:
        return json.loads(str(data, "utf-8"))


@cache
def _pil() -> ModuleType:
    """Import ``PIL.Image`` on first use."""
    from PIL import Image

    return Image


@cache
def _pil_decodes_buffers() -> bool:
    """Whether Pillow decodes raw pixels from any buffer: from 10 on; 9.x (Databricks Runtime 14.3 and 15.4 ship 9.4)
    takes only ``bytes`` and refuses a memoryview with a TypeError."""
    import PIL

    return int(PIL.__version__.split(".")[0]) >= 10


@cache
def _jpeg_file_class() -> type:
    """Import Pillow's JPEG plugin on first use and return its image class."""
    from PIL.JpegImagePlugin import JpegImageFile

    return JpegImageFile


def _check_image(obj: Any, encoding: str) -> None:
    if not isinstance(obj, _pil().Image):
        raise EncodingTypeError(f"{encoding} expects a PIL.Image.Image, got {_describe(obj)} {obj!r:.80}")


def _open_image(data: bytes | memoryview) -> Any:
    """Open encoded image bytes lazily, as ``PIL.Image.open`` does."""
    return _pil().open(BytesIO(data))


def _save_image(obj: Any, image_format: str, encoding: str) -> bytes:
    out = BytesIO()
    try:
        obj.save(out, format=image_format)
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(
            f"{encoding} cannot store a {obj.mode} image ({err}); convert it first, e.g. image.convert('RGB')"
        ) from None
    return out.getvalue()


class PIL(Encoding):
    """``pil``: an image's raw pixels: uint32 width, height and mode length, the mode, then ``tobytes()``."""

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        _check_image(obj, "pil")
        mode = obj.mode.encode("utf-8")
        width, height = obj.size
        return b"".join((_PIL_HEADER.pack(width, height, len(mode)), mode, obj.tobytes()))

    def decode(self, data: bytes | memoryview) -> Any:
        try:
            width, height, mode_size = _PIL_HEADER.unpack_from(data, 0)
        except struct.error:
            # A ValueError, as upstream's unpacking of too few header values gives.
            raise ValueError(f"pil image header is {_PIL_HEADER.size} bytes, got {memoryview(data).nbytes}") from None
        start = _PIL_HEADER.size + mode_size
        mode = str(data[_PIL_HEADER.size : start], "utf-8")
        image = _pil()
        pixels = width * height
        # Checked before Pillow allocates width x height: its bomb limit does not apply to frombytes, and
        # every mode stores at least one bit per pixel.
        if pixels > 8 * (len(data) - start):
            raise ValueError(
                f"pil image header says {width}x{height} pixels but only {len(data) - start} bytes of pixels follow."
            )
        if image.MAX_IMAGE_PIXELS is not None and pixels > 2 * image.MAX_IMAGE_PIXELS:
            raise image.DecompressionBombError(
                f"pil image of {pixels} pixels exceeds twice PIL.Image.MAX_IMAGE_PIXELS ({image.MAX_IMAGE_PIXELS}): "
                f"it could be a decompression bomb."
            )
        pixels = data[start:]
        if isinstance(pixels, memoryview) and not _pil_decodes_buffers():
            pixels = pixels.tobytes()
        return image.frombytes(mode, (width, height), pixels)


class JPEG(Encoding):
    """``jpeg``: JPEG file bytes.

    A ``JpegImageFile`` whose file still exists is stored as that file's bytes (no lossy re-encoding);
    any other image is encoded with Pillow's default quality.
    """

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        _check_image(obj, "jpeg")
        if isinstance(obj, _jpeg_file_class()):
            filename = getattr(obj, "filename", None)
            if isinstance(filename, (str, bytes, os.PathLike)) and filename and os.path.isfile(filename):
                with open(filename, "rb") as file:
                    return file.read()
        return _save_image(obj, "JPEG", "jpeg")

    def decode(self, data: bytes | memoryview) -> Any:
        return _open_image(data)


class PNG(Encoding):
    """``png``: PNG file bytes.

    PNG has no 32-bit integer mode: a mode ``I`` image is stored as 16-bit grayscale (``I;16``, values clipped to
    0..65535), as upstream does, and decodes as mode ``I;16``.
    """

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        _check_image(obj, "png")
        if obj.mode == "I":
            obj = obj.convert("I;16")
        return _save_image(obj, "PNG", "png")

    def decode(self, data: bytes | memoryview) -> Any:
        return _open_image(data)


class JPEGArray(Encoding):
    """``jpeg_array``: a sequence of already-encoded JPEG files; decodes to a list of images.

    Layout: uint32 count n, uint32[n] sizes, then the files back to back.
    """

    zero_copy = True

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, (list, tuple)):
            raise TypeError(f"jpeg_array expects a list of JPEG bytes, got {_describe(obj)} {obj!r:.80}")
        if not obj:
            raise ValueError("jpeg_array expects at least one JPEG, got an empty sequence")
        for index, item in enumerate(obj):
            if not isinstance(item, (bytes, bytearray, memoryview)):
                raise TypeError(f"jpeg_array expects JPEG bytes, got {_describe(item)} at index {index}")
        count = len(obj)
        header = struct.pack(f"<{count + 1}I", count, *map(len, obj))
        return b"".join((header, *obj))

    def decode(self, data: bytes | memoryview) -> list[Any]:
        if len(data) < _U32.size:
            raise ValueError(f"jpeg_array data is {len(data)} bytes, too short to hold the image count")
        count = _U32.unpack_from(data, 0)[0]
        if count == 0:
            raise ValueError("jpeg_array data holds no images")
        sizes = struct.unpack_from(f"<{count}I", data, _U32.size)
        return _split(data, _U32.size * (count + 1), sizes, _open_image, "jpeg_array")


def _split(
    data: bytes | memoryview, offset: int, sizes: tuple[int, ...], decode: Callable[[Any], Any], encoding: str
) -> list[Any]:
    """Decode consecutive items of the given sizes starting at ``offset``; their sizes must fill ``data``."""
    if offset + sum(sizes) != len(data):
        raise ValueError(f"{encoding} data is {len(data)} bytes but its header describes {offset + sum(sizes)}")
    items = []
    for size in sizes:
        items.append(decode(data[offset : offset + size]))
        offset += size
    return items


class List(Encoding):
    """A list of values of one encoding, which subclasses name in ``underlying_encoder``.

    Layout: uint32 0 (reserved), uint32 count n, uint32[n] sizes, then the encoded items back to back.
    Upstream's way of defining one works: subclass and return the item coder from ``underlying_encoder``.
    """

    zero_copy = True
    name = "list"
    items = "values"

    @abstractmethod
    def underlying_encoder(self) -> Encoding:
        """Return the coder of the list's items."""

    def _item_coder(self) -> Encoding:
        # Built once per instance; a race between threads only builds an equal coder twice.
        item = self.__dict__.get("_item")
        if item is None:
            item = self.__dict__["_item"] = self.underlying_encoder()
        return item

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, (list, tuple)):
            raise EncodingTypeError(f"{self.name} expects a list of {self.items}, got {_describe(obj)} {obj!r:.80}")
        item_coder = self._item_coder()
        parts = []
        for index, item in enumerate(obj):
            try:
                parts.append(item_coder.encode(item))
            except (TypeError, ValueError) as err:
                raise type(err)(f"{self.name} item {index}: {err}") from None
        count = len(parts)
        header = struct.pack(f"<{count + 2}I", 0, count, *map(len, parts))
        return b"".join((header, *parts))

    def decode(self, data: bytes | memoryview) -> list[Any]:
        item_coder = self._item_coder()
        if not item_coder.zero_copy and type(data) is not bytes:
            data = bytes(data)
        count = _LIST_HEADER.unpack_from(data, 0)[1]
        sizes = struct.unpack_from(f"<{count}I", data, _LIST_HEADER.size)
        return _split(data, _LIST_HEADER.size + _U32.size * count, sizes, item_coder.decode, self.name)


class PILList(List):
    """``list[pil]``."""

    name, items = "list[pil]", "PIL images"

    def underlying_encoder(self) -> Encoding:
        return PIL()


class JPEGList(List):
    """``list[jpeg]``."""

    name, items = "list[jpeg]", "PIL images"

    def underlying_encoder(self) -> Encoding:
        return JPEG()


class PNGList(List):
    """``list[png]``."""

    name, items = "list[png]", "PIL images"

    def underlying_encoder(self) -> Encoding:
        return PNG()


#: The byte that names an ``ndarray`` value's dtype in front of its shape (when the encoding names no dtype).
NDARRAY_DTYPE_CODES = {
    "uint8": 8,
    "int8": 9,
    "uint16": 16,
    "int16": 17,
    "float16": 18,
    "uint32": 32,
    "int32": 33,
    "float32": 34,
    "uint64": 64,
    "int64": 65,
    "float64": 66,
}
_CODE_OF_DTYPE = {np.dtype(name).newbyteorder("<"): code for name, code in NDARRAY_DTYPE_CODES.items()}
DTYPE_OF_CODE: list[np.dtype | None] = [None] * 256
for _dtype, _code in _CODE_OF_DTYPE.items():
    DTYPE_OF_CODE[_code] = _dtype
_CODE_BYTES = {code: bytes((code,)) for code in NDARRAY_DTYPE_CODES.values()}
# Shape header byte -> struct of the ndim shape values that follow it, in the width its low 2 bits select.
_SHAPE_LAYOUTS = [struct.Struct("<" + "BHIQ"[header & 3] * (header >> 2)) for header in range(256)]
_MAX_NDIM = 63


def _shape_width_code(largest: int) -> int:
    """Return 0..3 for the narrowest unsigned width (8, 16, 32, 64 bits) that holds ``largest``."""
    if largest < 1 << 8:
        return 0
    if largest < 1 << 16:
        return 1
    if largest < 1 << 32:
        return 2
    return 3


class NDArray(Encoding):
    """``ndarray[:dtype[:shape]]``: a numpy array; the dtype and the shape are stored unless configured.

    Layout: [dtype code byte, if the dtype is not configured] [shape header, if the shape is not
    configured: one byte ``ndim << 2 | width`` then ndim unsigned ints of that width] [C-order values,
    little-endian]. With both configured, every value has the fixed size ``prod(shape) * itemsize``.

    Args:
        dtype: the dtype name every array must have, or ``None``.
        shape: the shape every array must have, or ``None``.
    """

    zero_copy = True

    def __init__(self, dtype: str | None = None, shape: tuple[int, ...] | None = None) -> None:
        if dtype is not None and dtype not in NDARRAY_DTYPE_CODES:
            choices = ", ".join(NDARRAY_DTYPE_CODES)
            raise MalformedEncodingError(f"ndarray dtype must be one of {choices}, got {dtype!r}")
        if shape is not None:
            shape = tuple(shape)
            if not shape or any(not isinstance(dim, int) or dim < 1 for dim in shape):
                raise MalformedEncodingError(f"ndarray shape must be one or more dimensions of at least 1, got {shape}")
            if len(shape) > _MAX_NDIM:
                raise MalformedEncodingError(
                    f"ndarray shape has {len(shape)} dimensions, at most {_MAX_NDIM} are allowed"
                )
        self.dtype = dtype
        self.shape = shape
        self._dtype = None if dtype is None else np.dtype(dtype).newbyteorder("<")
        self.size = None
        if self._dtype is not None and shape is not None:
            self.size = int(np.prod(shape)) * self._dtype.itemsize

    @classmethod
    def from_str(cls, text: str) -> NDArray:
        """Parse ``""``, ``"<dtype>"`` or ``"<dtype>:<d1,d2,...>"`` (the part after ``ndarray:``)."""
        if not text:
            return cls()
        parts = text.split(":")
        if len(parts) > 2:
            raise MalformedEncodingError(
                f"expected ndarray, ndarray:<dtype> or ndarray:<dtype>:<d1,d2,...>, got 'ndarray:{text}'"
            )
        dtype = parts[0]
        if not dtype:
            raise MalformedEncodingError("a shape needs a dtype: write ndarray:<dtype>:<shape>, e.g. ndarray:uint8:3")
        if len(parts) == 1:
            return cls(dtype)
        try:
            shape = tuple(int(dim) for dim in parts[1].split(","))
        except ValueError:
            raise ValueError(f"ndarray shape must be comma-separated integers, got {parts[1]!r}") from None
        return cls(dtype, shape)

    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, np.generic):
            # A numpy scalar has a dtype and a shape, so upstream checks it as a 0-d array (ValueError on the
            # dtype or the shape), not as a wrong type.
            obj = np.asarray(obj)
        if not isinstance(obj, np.ndarray):
            raise EncodingTypeError(
                f"data should be of type {np.ndarray}, but instead, found as {type(obj)}: "
                f"ndarray expects a numpy.ndarray, got {_describe(obj)} {obj!r:.80}"
            )
        dtype = obj.dtype
        code = _CODE_OF_DTYPE.get(dtype)
        if code is None:
            little = dtype.newbyteorder("<") if dtype.byteorder == ">" else None
            code = _CODE_OF_DTYPE.get(little)
            if code is None:
                raise ValueError(
                    f"Unsupported dtype: {dtype}. ndarray cannot store dtype {dtype}; supported dtypes: "
                    f"{', '.join(NDARRAY_DTYPE_CODES)} (convert with array.astype(...))"
                )
            obj = obj.astype(little)
            dtype = little
        if self._dtype is not None and dtype != self._dtype:
            raise ValueError(
                f"Wrong dtype: expected {self.dtype}, got {dtype.name}. {self._name()} expects dtype {self.dtype}, "
                f"got {dtype}"
            )
        if obj.size == 0:
            raise ValueError(
                f"Attempting to encode a numpy array with 0 elements. {self._name()} cannot store an empty array "
                f"(shape {obj.shape})"
            )
        if self.shape is not None:
            if obj.shape != self.shape:
                raise ValueError(
                    f"Wrong shape: expected {self.shape}, got {obj.shape}. {self._name()} expects shape {self.shape}, "
                    f"got {obj.shape}"
                )
            head = b"" if self._dtype is not None else _CODE_BYTES[code]
            return head + obj.tobytes()
        shape = obj.shape
        ndim = len(shape)
        if ndim == 0:
            raise ValueError(
                f"Attempting to encode a scalar with NDArray encoding. Please use a scalar encoding. "
                f"{self._name()} cannot store a 0-d array (a scalar); use a scalar encoding such as {dtype.name} or "
                f"wrap it with numpy.atleast_1d"
            )
        if ndim > _MAX_NDIM:
            raise ValueError(
                f"Array has too many axes: maximum {_MAX_NDIM}, got {ndim}. {self._name()} stores at most "
                f"{_MAX_NDIM} dimensions, got {ndim}"
            )
        header = ndim << 2 | _shape_width_code(max(shape))
        shape_bytes = _SHAPE_LAYOUTS[header].pack(*shape)
        head = bytes((header,)) if self._dtype is not None else bytes((code, header))
        return b"".join((head, shape_bytes, obj.tobytes()))

    def decode(self, data: bytes | memoryview) -> np.ndarray:
        view = memoryview(data)
        return self.decode_at(view, 0, view.nbytes)

    def decode_at(self, buffer: memoryview, start: int, stop: int) -> np.ndarray:
        """``decode(buffer[start:stop])`` without the slice: the array is a read-only view of ``buffer`` itself.

        A malformed value fails as upstream's does: a missing header byte with IndexError, an unknown dtype code
        with a KeyError, a shape header cut off or values that do not fill the shape with ValueError.
        """
        offset = start
        dtype = self._dtype
        if dtype is None:
            if offset >= stop:
                raise IndexError("ndarray data is empty: its dtype code is missing")
            dtype = DTYPE_OF_CODE[buffer[offset]]
            if dtype is None:
                raise UnknownDtypeCodeError(
                    f"ndarray data starts with unknown dtype code {buffer[offset]}; known codes: {NDARRAY_DTYPE_CODES}"
                )
            offset += 1
        shape = self.shape
        if shape is None:
            if offset >= stop:
                raise IndexError("ndarray data ends before its shape header")
            layout = _SHAPE_LAYOUTS[buffer[offset]]
            offset += 1
            if offset + layout.size > stop:
                raise ValueError(f"ndarray shape header of {layout.size} bytes is cut off at {stop - offset}")
            shape = layout.unpack_from(buffer, offset)
            offset += layout.size
        size = (shape[0] if len(shape) == 1 else math.prod(shape)) * dtype.itemsize
        if offset + size != stop:
            # ValueError, as upstream's reshape of the wrong number of values raises.
            raise ValueError(
                f"ndarray of shape {shape} and dtype {dtype} takes {size} bytes but its value holds {stop - offset}"
            )
        array = np.ndarray(shape, dtype, buffer, offset)
        if not buffer.readonly:  # the value must not be a way to change the buffer
            array.flags.writeable = False
        return array

    def _name(self) -> str:
        """The encoding string this coder was configured from, for error messages."""
        if self.dtype is None:
            return "ndarray"
        if self.shape is None:
            return f"ndarray:{self.dtype}"
        return f"ndarray:{self.dtype}:{','.join(map(str, self.shape))}"


_coders: dict[str, Encoding] = {}


class _EncodingRegistry(dict):
    """The name → class dict of encodings; any change drops the cached coders."""

    def __setitem__(self, name: str, cls: type[Encoding]) -> None:
        _coders.clear()
        super().__setitem__(name, cls)

    def __delitem__(self, name: str) -> None:
        _coders.clear()
        super().__delitem__(name)

    # mypy checks an in-place operator against dict's generic, overloaded __or__, which no subclass's return
    # type can satisfy; `|=` does return this registry.
    def __ior__(self, other: Any) -> _EncodingRegistry:  # type: ignore[misc]
        _coders.clear()
        return super().__ior__(other)

    def update(self, *args: Any, **kwargs: Any) -> None:
        _coders.clear()
        super().update(*args, **kwargs)

    def pop(self, *args: Any) -> Any:
        _coders.clear()
        return super().pop(*args)

    def popitem(self) -> tuple[str, type[Encoding]]:
        _coders.clear()
        return super().popitem()

    def setdefault(self, name: str, cls: Any = None) -> Any:
        _coders.clear()
        return super().setdefault(name, cls)

    def clear(self) -> None:
        _coders.clear()
        super().clear()


_encodings: dict[str, type[Encoding]] = _EncodingRegistry(
    {
        "bytes": Bytes,
        "str": Str,
        "int": Int,
        "uint8": UInt8,
        "uint16": UInt16,
        "uint32": UInt32,
        "uint64": UInt64,
        "int8": Int8,
        "int16": Int16,
        "int32": Int32,
        "int64": Int64,
        "float16": Float16,
        "float32": Float32,
        "float64": Float64,
        "str_int": StrInt,
        "str_float": StrFloat,
        "str_decimal": StrDecimal,
        "pil": PIL,
        "jpeg": JPEG,
        "png": PNG,
        "jpeg_array": JPEGArray,
        "jpegarray": JPEGArray,
        "list[pil]": PILList,
        "list[jpeg]": JPEGList,
        "list[png]": PNGList,
        "pkl": Pickle,
        "json": JSON,
        "ndarray": NDArray,
    }
)

_unsafe_encodings: set[str] = {"pkl"}


def register_mds_encoding(name: str, cls: type[Encoding], *, safe: bool = True) -> None:
    """Make ``name`` an MDS encoding backed by ``cls`` (replacing any encoding of that name).

    Args:
        name: the encoding name used in ``columns``; it cannot contain ``:``, which starts a configuration.
        cls: an :class:`Encoding` subclass, instantiated with no arguments (or through its ``from_str``
            classmethod when the encoding string has a configuration).
        safe: ``False`` when decoding can run arbitrary code (like ``pkl``); readers then refuse the
            column unless ``allow_unsafe_types=True``.

    Raises:
        ValueError: ``name`` is empty, not a str, or contains ``:``.
        TypeError: ``cls`` is not an :class:`Encoding` subclass.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"MDS encoding name must be a non-empty str without ':', got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Encoding)):
        raise TypeError(f"MDS encoding {name!r} must be a subclass of {Encoding.__module__}.Encoding, got {cls!r}")
    _encodings[name] = cls
    if safe:
        _unsafe_encodings.discard(name)
    else:
        _unsafe_encodings.add(name)


def get_mds_encodings() -> set[str]:
    """Return the registered encoding names (``ndarray`` once, without configurations)."""
    return set(_encodings)


def _build_coder(encoding: Any) -> Encoding:
    if not isinstance(encoding, str):
        raise ValueError(f"An MDS encoding is a str, got {_describe(encoding)} {encoding!r:.80}")
    name, colon, config = encoding.partition(":")
    cls = _encodings.get(name)
    if cls is None:
        raise ValueError(
            f"Unsupported encoding: {encoding}. Valid encodings: {', '.join(sorted(_encodings))} "
            f"(ndarray also as ndarray:<dtype> or ndarray:<dtype>:<d1,d2,...>)"
        )
    if not (isinstance(cls, type) and issubclass(cls, Encoding)):
        raise TypeError(
            f"MDS encoding {name!r} is registered to {cls!r}, which is not a subclass of {Encoding.__module__}.Encoding"
        )
    if not colon:
        return cls()
    try:
        return cls.from_str(config)
    except (ValueError, TypeError, AssertionError) as err:
        malformed = MalformedEncodingError if isinstance(err, MalformedEncodingError) else ValueError
        raise malformed(f"Invalid MDS encoding {encoding!r}: {err}") from None


def get_mds_coder(encoding: str) -> Encoding:
    """Return the coder for a full encoding string (e.g. ``"ndarray:int16:3,4"``), cached per string.

    Its ``encode`` checks types strictly and does not pass ``bytes`` through (see :func:`mds_encode`).

    Raises:
        ValueError: unknown or malformed encoding (the message lists the valid names).
    """
    try:
        return _coders[encoding]
    except (KeyError, TypeError):
        pass
    coder = _build_coder(encoding)
    _coders[encoding] = coder
    return coder


#: Decodes one column value stored at ``buffer[start:stop]``.
ValueDecoder = Callable[[memoryview, int, int], Any]


def value_decoder(encoding: str) -> ValueDecoder:
    """How readers decode one value of ``encoding`` where it lies in a shard's buffer, given its byte range."""
    coder = get_mds_coder(encoding)
    # Every column value is decoded from the shard's mmap where it lies: no copy unless a decoder makes one.
    # Inlined only for the built-in classes themselves: a subclass registered in their place keeps its decode.
    if type(coder) is Str:
        return lambda buffer, start, stop: str(buffer[start:stop], "utf-8")
    if type(coder) is Bytes:
        return lambda buffer, start, stop: bytes(buffer[start:stop])
    if type(coder) is Int or type(coder) is NDArray:
        # Decoded in place (an ndarray is a read-only view of the mmap: the shard stays mapped while it lives).
        return coder.decode_at
    if decodes_views(coder):
        decode = coder.decode
        return lambda buffer, start, stop: decode(buffer[start:stop])
    # Third-party coders were written for bytes (upstream's contract): give them a private copy.
    return lambda buffer, start, stop: coder.decode(bytes(buffer[start:stop]))


def is_mds_encoding(encoding: str) -> bool:
    """Return whether ``encoding`` is a valid encoding string; never raises."""
    try:
        get_mds_coder(encoding)
    except Exception:  # noqa: BLE001 - any failure to build a coder means "not an encoding"
        return False
    return True


def is_mds_encoding_safe(encoding: str) -> bool:
    """Return whether decoding ``encoding`` cannot run arbitrary code.

    Every encoding is safe except ``pkl`` and those registered with ``safe=False``; a non-str is not.
    """
    return isinstance(encoding, str) and encoding.partition(":")[0] not in _unsafe_encodings


def get_mds_encoded_size(encoding: str) -> int | None:
    """Return the fixed byte size of every value of ``encoding``, or ``None`` if it varies."""
    return get_mds_coder(encoding).size


def mds_encode(encoding: str, obj: Any) -> bytes:
    """Encode one value; ``bytes`` are returned unchanged whatever the encoding (upstream behaviour).

    Raises:
        ValueError: unknown encoding, or a value the encoding cannot store.
        TypeError: a value of the wrong type.
    """
    coder = get_mds_coder(encoding)
    if isinstance(obj, bytes):
        return obj
    return coder.encode(obj)


def mds_decode(encoding: str, data: bytes | memoryview) -> Any:
    """Decode one value from ``bytes`` or a ``memoryview`` (copied to bytes for coders without zero_copy).

    Raises:
        ValueError: unknown encoding.
    """
    coder = get_mds_coder(encoding)
    if decodes_views(coder):
        return coder.decode(data)
    return coder.decode(data if type(data) is bytes else bytes(data))
