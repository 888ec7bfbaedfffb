"""Hypothesis strategies for differential cases: datasets for every writer and encoding, order arguments, bad inputs.

Values are kept small (a few samples, tiny images and arrays) so that a case costs milliseconds, while every
encoding, dtype, compression, hash algorithm and edge value (empty strings and bytes, unicode, extreme integers,
NaN/inf/-0.0, multi-dimensional and non-contiguous arrays, size limits that split shards) is reachable.
"""

from __future__ import annotations

import string
from decimal import Decimal
from io import BytesIO
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

from streaming.base.compression import get_compressions
from streaming.base.hashing import get_hashes

COMPRESSIONS = sorted(get_compressions())
HASHES = sorted(get_hashes())
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
SCALAR_ENCODINGS = NDARRAY_DTYPES
IMAGE_MODES = {
    "pil": ["1", "L", "P", "RGB", "RGBA", "LA", "I", "F", "CMYK", "YCbCr", "I;16"],
    "jpeg": ["L", "RGB", "CMYK"],
    "png": ["1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"],
}
PLAIN_MDS_ENCODINGS = [
    "bytes",
    "str",
    "int",
    *SCALAR_ENCODINGS,
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
]
XSV_ENCODINGS = ["str", "int", "float"]

texts = st.text(max_size=12)
names = st.text(string.ascii_letters + string.digits + "_ .-é", min_size=1, max_size=8)
floats64 = st.floats(allow_nan=True, allow_infinity=True)


def images(modes: list[str]) -> st.SearchStrategy[Image.Image]:
    """Small images of the given modes with random pixels."""

    @st.composite
    def build(draw: st.DrawFn) -> Image.Image:
        mode = draw(st.sampled_from(modes))
        size = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        length = len(Image.new(mode, size).tobytes())
        image = Image.frombytes(mode, size, draw(st.binary(min_size=length, max_size=length)))
        if mode == "P":
            # A palette image needs its palette to survive the pickle that carries it to the reference worker.
            image.putpalette(draw(st.binary(min_size=768, max_size=768)))
        return image

    return build()


def jpeg_bytes() -> st.SearchStrategy[bytes]:
    """The bytes of a small JPEG file."""

    def save(image: Image.Image) -> bytes:
        out = BytesIO()
        image.save(out, format="JPEG")
        return out.getvalue()

    return images(IMAGE_MODES["jpeg"]).map(save)


def ndarrays(dtype: str | None = None, shape: tuple[int, ...] | None = None) -> st.SearchStrategy[np.ndarray]:
    """Non-empty arrays of one of the MDS dtypes, 1 to 4 dimensions, sometimes non-contiguous or with a dimension
    of 256 or more (which widens the stored shape to uint16; wider shapes would make cases slow to compress)."""
    dtypes = st.just(dtype) if dtype else st.sampled_from(NDARRAY_DTYPES)
    if shape is not None:
        shapes: st.SearchStrategy[tuple[int, ...]] = st.just(shape)
    else:
        shapes = st.one_of(
            hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4),
            st.sampled_from([(256,), (1, 300), (2, 1, 257)]),
        )

    @st.composite
    def build(draw: st.DrawFn) -> np.ndarray:
        kind = draw(dtypes)
        dims = draw(shapes)
        if int(np.prod(dims)) > 1024:
            with np.errstate(over="ignore"):
                array = np.arange(int(np.prod(dims))).astype(kind).reshape(dims)
        else:
            array = draw(hnp.arrays(kind, dims))
        if array.ndim >= 2 and shape is None and draw(st.booleans()):
            array = array.T
        return array

    return build()


def ndarray_encodings() -> st.SearchStrategy[str]:
    """``ndarray``, ``ndarray:<dtype>`` and ``ndarray:<dtype>:<shape>``."""
    fixed_shape = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3).map(
        lambda dims: ",".join(map(str, dims))
    )
    return st.one_of(
        st.just("ndarray"),
        st.sampled_from(NDARRAY_DTYPES).map(lambda dtype: f"ndarray:{dtype}"),
        st.tuples(st.sampled_from(NDARRAY_DTYPES), fixed_shape).map(lambda pair: f"ndarray:{pair[0]}:{pair[1]}"),
    )


def _scalar_values(encoding: str) -> st.SearchStrategy[Any]:
    """Python numbers in range (as the fast path takes them) and numpy scalars of the column's dtype."""
    info: Any = np.finfo(encoding) if encoding.startswith("float") else np.iinfo(encoding)
    if encoding.startswith("float"):
        python = st.floats(width=int(encoding[5:]), allow_nan=True, allow_infinity=True)
        numpy_values = hnp.from_dtype(np.dtype(encoding))
        return st.one_of(python, floats64, numpy_values)
    python = st.integers(int(info.min), int(info.max))
    return st.one_of(python, python.map(np.dtype(encoding).type), st.sampled_from([int(info.min), int(info.max)]))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | floats64 | texts,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=8,
)
pickle_values = st.recursive(
    st.none() | st.booleans() | st.integers() | floats64 | texts | st.binary(max_size=8) | st.decimals(),
    lambda children: (
        st.lists(children, max_size=3) | st.tuples(children, children) | st.dictionaries(texts, children, max_size=3)
    ),
    max_leaves=8,
)


def mds_values(encoding: str) -> st.SearchStrategy[Any]:
    """Valid values for one MDS encoding string."""
    name, _, config = encoding.partition(":")
    if name == "ndarray":
        dtype, _, dims = config.partition(":")
        shape = tuple(int(dim) for dim in dims.split(",")) if dims else None
        return ndarrays(dtype or None, shape)
    if name in SCALAR_ENCODINGS:
        return _scalar_values(name)
    table: dict[str, st.SearchStrategy[Any]] = {
        "bytes": st.binary(max_size=24),
        "str": st.text(max_size=24),
        "int": st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-(2**63), 2**63 - 1, 0]), st.booleans()),
        "str_int": st.integers(-(10**30), 10**30),
        "str_float": floats64,
        "str_decimal": st.decimals(allow_nan=True, allow_infinity=True, places=None),
        "pil": images(IMAGE_MODES["pil"]),
        "jpeg": images(IMAGE_MODES["jpeg"]),
        "png": images(IMAGE_MODES["png"]),
        "jpeg_array": st.lists(jpeg_bytes(), min_size=1, max_size=3),
        "jpegarray": st.lists(jpeg_bytes(), min_size=1, max_size=3),
        "list[pil]": st.lists(images(IMAGE_MODES["pil"]), max_size=3),
        "list[jpeg]": st.lists(images(IMAGE_MODES["jpeg"]), max_size=3),
        "list[png]": st.lists(images(IMAGE_MODES["png"]), max_size=3),
        # Top-level bytes would be stored raw by every encoding (upstream's mds_encode passes bytes through).
        "pkl": pickle_values.filter(lambda value: not isinstance(value, bytes)),
        "json": json_values,
    }
    return table[name]


def xsv_values(encoding: str, forbidden: str) -> st.SearchStrategy[Any]:
    """Valid XSV/JSON values: text without the separator and newline characters, ints, floats."""
    if encoding == "str":
        return st.text(st.characters(blacklist_characters=forbidden, blacklist_categories=("Cs",)), max_size=12)
    if encoding == "int":
        return st.integers(-(2**70), 2**70)
    return floats64


size_limits = st.one_of(st.none(), st.integers(1, 3000), st.sampled_from([1, 64, "1kb", "2KiB", 1 << 26, "64mb"]))
hash_lists = st.lists(st.sampled_from(HASHES), unique=True, max_size=3).map(sorted)


@st.composite
def dataset_cases(draw: st.DrawFn, writer: str | None = None, max_samples: int = 10) -> dict[str, Any]:
    """A writer, its columns and arguments, and samples that are valid for them: ``operations.write`` kwargs."""
    writer = writer or draw(st.sampled_from(["mds", "mds", "mds", "json", "csv", "tsv", "xsv"]))
    kwargs: dict[str, Any] = {
        "compression": draw(st.one_of(st.none(), st.sampled_from(COMPRESSIONS))),
        "hashes": draw(hash_lists),
        "size_limit": draw(size_limits),
    }
    forbidden = ""
    if writer == "xsv":
        kwargs["separator"] = draw(st.sampled_from([",", "|", ";", "\t", "::", "é", " "]))
    if writer in ("xsv", "csv", "tsv"):
        kwargs["newline"] = draw(st.sampled_from(["\n", "\r\n", "\n\n"]))
        separator = kwargs.get("separator", {"csv": ",", "tsv": "\t"}.get(writer, ""))
        forbidden = separator + kwargs["newline"]
    if writer == "json":
        kwargs["newline"] = draw(st.sampled_from(["\n", "\r\n"]))
    column_names = draw(
        st.lists(
            names.filter(lambda name: not any(char in name for char in forbidden)),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    if writer == "mds":
        encodings = st.one_of(st.sampled_from(PLAIN_MDS_ENCODINGS), ndarray_encodings())
        columns = {name: draw(encodings) for name in column_names}
        value_for = {name: mds_values(encoding) for name, encoding in columns.items()}
    else:
        columns = {name: draw(st.sampled_from(XSV_ENCODINGS)) for name in column_names}
        value_for = {name: xsv_values(encoding, forbidden) for name, encoding in columns.items()}
    samples = draw(st.lists(st.fixed_dictionaries(value_for), max_size=max_samples))
    return {"writer": writer, "columns": columns, "samples": samples, **kwargs}


# ------------------------------------------------------------------ bad inputs


WRONG_VALUES = st.sampled_from(
    ["text", b"bytes", 3, 2.5, None, [1, 2], {"a": 1}, np.int64(7), np.float32(1.5), Decimal("1.5"), True]
)
BAD_ENCODINGS = ["int128", "ndarray:complex64", "ndarray:int8:0", "ndarray:int8:a", "ndarray::3", "list[foo]", "", 7]
BAD_COMPRESSIONS = ["lz4", "zstd:99", "gz:10", "br:12", "snappy:1", "ZSTD", ""]
BAD_ARRAYS = [
    np.zeros(0, np.int32),
    np.zeros((2, 0), np.uint8),
    np.array(5, np.int16),
    np.zeros(3, np.complex64),
    np.zeros(2, bool),
    np.array(["a"], object),
]


@st.composite
def bad_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A valid dataset case with one thing made wrong: a value's type, an encoding, a compression, a hash, a
    size limit, a shape, a missing column, a separator inside a value."""
    case = draw(dataset_cases(max_samples=3))
    writer, columns = case["writer"], case["columns"]
    name = draw(st.sampled_from(sorted(columns)))
    mutations = ["value", "encoding", "compression", "hashes", "size_limit", "missing", "argument"]
    if writer == "mds":
        mutations += ["array", "fixed_size_bytes", "out_of_range", "fixed_ndarray"]
    if writer in ("csv", "tsv", "xsv"):
        mutations += ["separator_in_value", "separator_in_name"]
    mutation = draw(st.sampled_from(mutations))
    samples = [dict(sample) for sample in case["samples"]] or [
        draw(st.fixed_dictionaries({column: WRONG_VALUES for column in columns}))
    ]
    position = draw(st.integers(0, len(samples) - 1))
    if mutation == "value":
        samples[position][name] = draw(WRONG_VALUES)
    elif mutation == "encoding":
        columns = {**columns, name: draw(st.sampled_from(BAD_ENCODINGS))}
    elif mutation == "compression":
        case["compression"] = draw(st.sampled_from(BAD_COMPRESSIONS))
    elif mutation == "hashes":
        case["hashes"] = draw(st.sampled_from([["crc32"], ["sha256", "md5"], ["md5", "md5"], ["SHA1"]]))
    elif mutation == "size_limit":
        case["size_limit"] = draw(st.sampled_from([-1, 1 << 32, "5 bananas", "-3kb", 2.5]))
    elif mutation == "missing":
        del samples[position][name]
    elif mutation == "argument":
        case["max_workers_typo"] = 3
    elif mutation == "array":
        columns = {**columns, name: draw(st.sampled_from(["ndarray", "ndarray:int32"]))}
        samples[position][name] = draw(st.sampled_from(BAD_ARRAYS))
    elif mutation == "fixed_size_bytes":
        columns = {**columns, name: draw(st.sampled_from(["int", "uint16", "float32", "ndarray:int8:2"]))}
        for sample in samples:
            sample[name] = draw(st.binary(max_size=12))
    elif mutation == "out_of_range":
        encoding = draw(st.sampled_from(["int", *[e for e in SCALAR_ENCODINGS if "int" in e]]))
        columns = {**columns, name: encoding}
        limit = 2**64 if encoding in ("int", "uint64", "int64") else 2**32
        for sample in samples:
            sample[name] = draw(st.integers(-(2**40), 2**40))
        samples[position][name] = draw(st.sampled_from([limit, -limit - 1, -1 if encoding.startswith("u") else limit]))
    elif mutation == "fixed_ndarray":
        columns = {**columns, name: "ndarray:int16:2,3"}
        for sample in samples:
            sample[name] = np.zeros((2, 3), np.int16)
        samples[position][name] = draw(
            st.sampled_from([np.zeros((3, 2), np.int16), np.zeros((2, 3), np.int32), np.zeros(6, np.int16)])
        )
    elif mutation == "separator_in_value":
        columns = {**columns, name: "str"}
        forbidden = case.get("separator", {"csv": ",", "tsv": "\t"}.get(writer, ",")) + case["newline"]
        for sample in samples:
            sample[name] = "ok"
        samples[position][name] = "a" + draw(st.sampled_from(list(forbidden))) + "b"
    elif mutation == "separator_in_name":
        separator = case.get("separator", {"csv": ",", "tsv": "\t"}.get(writer, ","))
        columns = {f"{name}{separator}x": columns[name], **{k: v for k, v in columns.items() if k != name}}
        samples = [{f"{name}{separator}x": sample.pop(name, None), **sample} for sample in samples]
    case["columns"] = columns
    case["samples"] = samples
    case["mutation"] = mutation
    return case


# ------------------------------------------------------------------ sample order

SHUFFLE_ALGOS = ["naive", "py1s", "py2s", "py1br", "py1e"]
seeds = st.one_of(st.integers(0, 2**32 - 1), st.integers(0, 10))


@st.composite
def partition_args(draw: st.DrawFn) -> list[Any]:
    """``get_partitions(algo, num_samples, num_canonical_nodes, num_physical_nodes, ranks_per_node,
    workers_per_rank, batch_size, drop_first, initial_physical_nodes)``."""
    num_samples = draw(st.integers(0, 400))
    return [
        draw(st.sampled_from(["orig", "relaxed"])),
        num_samples,
        draw(st.integers(1, 12)),
        draw(st.integers(1, 8)),
        draw(st.integers(1, 4)),
        draw(st.integers(1, 4)),
        draw(st.integers(1, 8)),
        draw(st.one_of(st.just(0), st.integers(0, num_samples), st.integers(0, num_samples + 20))),
        draw(st.one_of(st.none(), st.integers(1, 8))),
    ]


shard_size_lists = st.lists(st.integers(0, 40), min_size=1, max_size=16)


@st.composite
def shuffle_args(draw: st.DrawFn) -> list[Any]:
    """``get_shuffle(algo, shard_sizes, num_canonical_nodes, seed, epoch, block_size)``."""
    return [
        draw(st.sampled_from(SHUFFLE_ALGOS)),
        draw(shard_size_lists),
        draw(st.integers(1, 9)),
        draw(seeds),
        draw(st.integers(0, 6)),
        draw(st.integers(1, 120)),
    ]


@st.composite
def sampling_args(draw: st.DrawFn) -> list[Any]:
    """``get_sampling(samples_per_shard, choose, granularity, seed, epoch, use_epoch)``."""
    sizes = draw(shard_size_lists)
    return [
        sizes,
        draw(st.integers(0, 2 * sum(sizes) + 3)),
        draw(st.integers(1, 12)),
        draw(seeds),
        draw(st.integers(0, 6)),
        draw(st.booleans()),
    ]


@st.composite
def plan_cases(draw: st.DrawFn) -> dict[str, Any]:
    """Streams (shard sizes and a weight), StreamingDataset arguments, a world, an epoch and a position."""
    num_streams = draw(st.integers(1, 3))
    relative = draw(st.booleans())
    streams = []
    for _ in range(num_streams):
        stream: dict[str, Any] = {"shard_sizes": draw(st.lists(st.integers(0, 12), min_size=1, max_size=5))}
        if relative:
            stream["proportion"] = draw(st.floats(0.1, 3.0))
        else:
            kind = draw(st.sampled_from(["none", "repeat", "choose"]))
            if kind == "repeat":
                stream["repeat"] = draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]))
            elif kind == "choose":
                stream["choose"] = draw(st.integers(0, 60))
        streams.append(stream)
    kwargs = {
        "batch_size": draw(st.integers(1, 6)),
        "shuffle": draw(st.booleans()),
        "shuffle_algo": draw(st.sampled_from(SHUFFLE_ALGOS)),
        "shuffle_seed": draw(st.integers(0, 2**31 - 1)),
        "num_canonical_nodes": draw(st.one_of(st.none(), st.integers(1, 8))),
        "shuffle_block_size": draw(st.one_of(st.none(), st.integers(1, 40))),
        "sampling_method": draw(st.sampled_from(["balanced", "fixed"])),
        "sampling_granularity": draw(st.integers(1, 4)),
        "batching_method": draw(st.sampled_from(["random", "stratified", "per_stream", "device_per_stream"])),
        "partition_algo": draw(st.sampled_from(["relaxed", "orig"])),
        "epoch_size": draw(st.one_of(st.none(), st.integers(1, 120))),
    }
    world = (draw(st.integers(1, 4)), draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    return {
        "streams": streams,
        "dataset_kwargs": kwargs,
        "world": world,
        "epoch": draw(st.integers(0, 2)),
        "sample_in_epoch": draw(st.one_of(st.just(0), st.integers(0, 60))),
    }


#: The encodings whose decoding of any bytes is compared (``pkl`` aside: unpickling generated bytes is not a test).
#: Lists of images are left out: on a cut-short list the reference decodes the items whose sizes it still finds.
DECODED_ENCODINGS = [
    encoding
    for encoding in PLAIN_MDS_ENCODINGS
    if encoding not in ("pkl", "list[pil]", "list[jpeg]", "list[png]", "jpeg_array", "jpegarray")
]


@st.composite
def stored_values(draw: st.DrawFn) -> tuple[str, bytes]:
    """``(encoding, data)`` for ``mds_decode``: a valid value's bytes, cut short, padded or with a byte changed, or
    arbitrary bytes."""
    from streaming.base.format.mds.encodings import mds_encode

    encoding = draw(st.one_of(st.sampled_from(DECODED_ENCODINGS), ndarray_encodings()))
    if draw(st.booleans()):
        return encoding, draw(st.binary(max_size=40))
    data = mds_encode(encoding, draw(mds_values(encoding)))
    # No changed byte in an image: it may become a dimension of millions, which Pillow allocates before it reads.
    mutations = ["none", "cut", "pad"] if encoding in IMAGE_MODES else ["none", "cut", "pad", "flip"]
    mutation = draw(st.sampled_from(mutations))
    if mutation == "cut" and data:
        data = data[: -draw(st.integers(1, min(len(data), 9)))]
    elif mutation == "pad":
        data += draw(st.binary(min_size=1, max_size=9))
    elif mutation == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return encoding, data
