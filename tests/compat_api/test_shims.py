"""Upstream's classes at upstream's paths are the real thing: encodings, compressions, readers and writers,
registries, distributed helpers and Stream's methods behave as the functions and objects they stand for."""

from __future__ import annotations

import json
import os
from decimal import Decimal

import numpy as np
import pytest
from PIL import Image

from streaming import LocalDataset, MDSWriter
from streaming.base.format.mds import encodings as mds

# ------------------------------------------------------------------------------------------------------- encodings

SCALARS = {
    "UInt8": ("uint8", 200),
    "UInt16": ("uint16", 60000),
    "UInt32": ("uint32", 4_000_000_000),
    "UInt64": ("uint64", 2**63 + 5),
    "Int8": ("int8", -100),
    "Int16": ("int16", -30000),
    "Int32": ("int32", -2_000_000_000),
    "Int64": ("int64", -(2**62)),
    "Float16": ("float16", 1.5),
    "Float32": ("float32", -2.25),
    "Float64": ("float64", 1e300),
}


def _values() -> dict[str, object]:
    image = Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3))
    return {
        "Bytes": ("bytes", b"\x00\xff"),
        "Str": ("str", "héllo"),
        "Int": ("int", -(2**40)),
        **SCALARS,
        "StrInt": ("str_int", 10**30),
        "StrFloat": ("str_float", 0.1),
        "StrDecimal": ("str_decimal", Decimal("1.10")),
        "PIL": ("pil", image),
        "PNG": ("png", image),
        "JPEGArray": ("jpeg_array", [mds.mds_encode("jpeg", image)]),
        "PILList": ("list[pil]", [image, image]),
        "PNGList": ("list[png]", [image]),
        "Pickle": ("pkl", {"a": (1, 2)}),
        "JSON": ("json", {"a": [1, 2]}),
        "NDArray": ("ndarray", np.arange(6, dtype=np.int16).reshape(2, 3)),
    }


@pytest.mark.parametrize("class_name", sorted(_values()))
def test_each_encoding_class_is_the_registered_coder(class_name):
    name, value = _values()[class_name]
    cls = getattr(mds, class_name)
    assert mds._encodings[name] is cls
    data = cls().encode(value)
    assert data == mds.mds_encode(name, value)
    decoded, registered = cls().decode(data), mds.mds_decode(name, data)
    assert _canonical(decoded) == _canonical(registered)
    assert type(decoded) is type(registered)


def _canonical(value: object) -> object:
    """A comparable form of a decoded value: images by mode, size and pixels, arrays by dtype, shape and values."""
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    if isinstance(value, Image.Image):
        return value.mode, value.size, value.tobytes()
    if isinstance(value, np.ndarray):
        return value.dtype, value.shape, value.tolist()
    return type(value), value


def test_scalar_takes_a_numpy_type_as_upstream():
    for class_name, (dtype, value) in SCALARS.items():
        coder = mds.Scalar(getattr(np, dtype))
        assert coder.encode(value) == getattr(mds, class_name)().encode(value) == np.array(value, dtype).tobytes()
        assert coder.size == np.dtype(dtype).itemsize and coder.decode(coder.encode(value)) == np.array(value, dtype)
    flag = mds.Scalar(np.bool_)  # no struct code: numpy does the work
    assert flag.encode(True) == b"\x01" and flag.decode(b"\x01") == np.True_ and flag.size == 1
    assert isinstance(mds.Int32(), mds.Scalar) and issubclass(mds.StrInt, mds.StrEncoding)


@pytest.fixture
def registry():
    saved = dict(mds._encodings)
    yield mds._encodings
    mds._encodings.clear()
    mds._encodings.update(saved)


class ShoutingStr(mds.Str):
    """Upstream-style subclass: overrides both methods and expects bytes in decode."""

    def encode(self, obj):
        return super().encode(obj.upper())

    def decode(self, data):
        assert type(data) is bytes  # a subclass that did not opt in to memoryviews gets bytes, as upstream
        return data.decode("utf-8") + "!"


class Int24(mds.Int):
    size = 3

    def encode(self, obj):
        return int(obj).to_bytes(3, "little", signed=True)

    def decode(self, data):
        return int.from_bytes(data, "little", signed=True)


class IntList(mds.List):
    def underlying_encoder(self):
        return mds.Int()


def test_subclasses_registered_upstreams_way_are_used_to_write_and_read(tmp_path, registry):
    mds._encodings["str"] = ShoutingStr  # replaces a built-in: the writer's inlined fast path must not bypass it
    mds._encodings["int"] = Int24
    mds._encodings["list[int]"] = IntList
    out = str(tmp_path / "ds")
    with MDSWriter(out=out, columns={"s": "str", "n": "int", "l": "list[int]"}) as writer:
        for i in range(3):
            writer.write({"s": f"row {i}", "n": -i, "l": list(range(i))})
    ds = LocalDataset(out)
    assert [ds[i] for i in range(3)] == [{"s": f"ROW {i}!", "n": -i, "l": list(range(i))} for i in range(3)]
    assert list(ds)[2] == {"s": "ROW 2!", "n": -2, "l": [0, 1]}
    assert mds.get_mds_encoded_size("int") == 3
    raw = open(os.path.join(out, "shard.00000.mds"), "rb").read()
    assert b"ROW 0" in raw and (-2).to_bytes(3, "little", signed=True) in raw


def test_built_in_classes_keep_their_fast_paths():
    assert mds.Str.zero_copy and mds.NDArray.zero_copy and mds.PILList.zero_copy
    assert not ShoutingStr.zero_copy and IntList.zero_copy  # IntList keeps List's own decode, and its fast path
    assert mds.Str().decode(memoryview(b"abc")) == "abc"


def test_json_and_xsv_encoding_classes(tmp_path):
    from streaming.base.format.json import encodings as json_enc
    from streaming.base.format.xsv import encodings as xsv_enc

    assert json_enc._encodings == {"str": json_enc.Str, "int": json_enc.Int, "float": json_enc.Float}
    assert json_enc.Int.is_encoded(True) and not json_enc.Float.is_encoded(1)
    assert json_enc.is_json_encoded("str", "x") and not json_enc.is_json_encoded("int", 1.5)
    assert xsv_enc._encodings["float"] is xsv_enc.Float and xsv_enc.Float.encode(0.1) == xsv_enc.xsv_encode(
        "float", 0.1
    )
    assert xsv_enc.Int.decode("-7") == xsv_enc.xsv_decode("int", "-7") == -7 and xsv_enc.Str.decode("a") == "a"
    with pytest.raises(TypeError, match="expects a int"):
        xsv_enc.Int.encode("7")

    class Hex(xsv_enc.Int):
        @classmethod
        def encode(cls, obj):
            return hex(obj)

        @classmethod
        def decode(cls, obj):
            return int(obj, 16)

    from streaming import CSVWriter

    saved = dict(xsv_enc._encodings)
    xsv_enc._encodings["hex"] = Hex
    try:
        out = str(tmp_path / "csv")
        with CSVWriter(out=out, columns={"h": "hex"}) as writer:
            writer.write({"h": 255})
        assert b"0xff" in open(os.path.join(out, "shard.00000.csv"), "rb").read()
        assert LocalDataset(out)[0] == {"h": 255}
    finally:
        xsv_enc._encodings.clear()
        xsv_enc._encodings.update(saved)


# ----------------------------------------------------------------------------------------------------- compression


def test_compression_classes_are_the_registered_algorithms():
    from streaming.base import compression as comp

    data = bytes(range(256)) * 64
    names = set()
    for cls in (comp.Brotli, comp.Bzip2, comp.Gzip, comp.Snappy, comp.Zstandard):
        for name, codec in cls.each():
            names.add(name)
            packed = codec.compress(data)
            assert packed == comp.compress(name, data), name
            assert codec.decompress(packed) == data == comp.decompress(name, packed)
        assert cls.extension == comp.get_compression_extension(cls.extension)
    assert names == comp.get_compressions()
    assert (
        comp.Zstandard().level == 3
        and comp.Brotli().level == 11
        and comp.Zstandard(7).compress(data) == comp.compress("zstd:7", data)
    )
    assert comp.Zstandard.levels == list(range(1, 23)) and comp.Gzip.levels == list(range(10))
    with pytest.raises(ValueError, match="zstd compression levels are 1..22"):
        comp.Zstandard(23)
    assert issubclass(comp.Zstandard, comp.LevelledCompression) and issubclass(comp.Snappy, comp.Compression)


# ------------------------------------------------------------------------------------------------ readers, writers


def test_reader_and_writer_classes_at_upstreams_paths(tmp_path):
    from streaming.base.format.base.reader import JointReader, Reader, SplitReader
    from streaming.base.format.base.writer import JointWriter, SplitWriter, Writer
    from streaming.base.format.json.writer import JSONWriter
    from streaming.base.format.mds.reader import MDSReader
    from streaming.base.format.mds.writer import MDSWriter as UpstreamMDSWriter
    from streaming.base.format.xsv.reader import CSVReader

    assert UpstreamMDSWriter is MDSWriter and issubclass(MDSWriter, JointWriter) and issubclass(JSONWriter, SplitWriter)
    assert issubclass(MDSReader, JointReader) and issubclass(CSVReader, SplitReader) and issubclass(Reader, object)
    assert issubclass(JointWriter, Writer) and CSVReader.separator == ","

    out = str(tmp_path / "mds")
    writer = MDSWriter(out=out, columns={"x": "int"}, compression="zstd")
    for i in range(5):
        writer.write({"x": i})
    shard = writer.encode_joint_shard()  # the shard as it would be stored now
    writer.finish()
    ds = LocalDataset(out)
    reader = ds.shards[0]
    assert isinstance(reader, MDSReader) and reader.size == len(reader) == 5
    assert reader[1:3] == [{"x": 1}, {"x": 2}] and reader[-1] == {"x": 4} and list(reader)[0] == {"x": 0}
    raw_path = os.path.join(out, "shard.00000.mds")
    assert open(raw_path, "rb").read() == shard
    assert reader.get_persistent_size(keep_zip=True) == reader.get_max_size() > reader.get_persistent_size(False)

    listing = {os.path.join(out, name) for name in os.listdir(out)}
    zip_bytes = reader.get_zip_size()
    assert reader.set_up_local(listing, safe_keep_zip=True) == reader.get_raw_size() + zip_bytes
    assert reader.set_up_local(listing, safe_keep_zip=False) == reader.get_raw_size()  # drops the zip copy
    assert not os.path.exists(raw_path + ".zstd")
    assert reader.evict() == reader.get_raw_size() and not os.path.exists(raw_path)
    with open(os.path.join(out, "index.json")) as file:
        entry = json.load(file)["shards"][0]
    rebuilt = MDSReader.from_json(out, None, entry)
    assert (rebuilt.samples, rebuilt.column_names, rebuilt.compression) == (5, ["x"], "zstd")


# ----------------------------------------------------------------------------------------------------- registries


def test_registry_utils(tmp_path):
    import catalogue

    from streaming.base.registry_utils import (
        TypedRegistry,
        construct_from_registry,
        create_registry,
        import_file,
        save_registry,
    )
    from streaming.base.stream import Stream, streams_registry

    assert isinstance(streams_registry, TypedRegistry) and streams_registry.get("stream") is Stream
    with save_registry():
        things = create_registry("streaming_test", "things", generic_type=object, description="test things")

        @things.register("adder")
        def adder(a, b=1):
            return a + b

        # As upstream (catalogue): a namespace counts as taken only if something is registered at its own path,
        # so a second registry of the same namespace is allowed and shares the items.
        assert create_registry("streaming_test", "things", generic_type=object).get("adder") is adder

        things.register_class("stream", func=Stream)
        assert construct_from_registry("adder", things, kwargs={"b": 5})(1) == 6  # a partial by default
        assert construct_from_registry("adder", things, partial_function=False, kwargs={"a": 2}) == 3
        built = construct_from_registry("stream", things, pre_validation_function=Stream, kwargs={"local": "/x"})
        assert isinstance(built, Stream) and built.local == "/x"
        with pytest.raises(ValueError, match="Expected adder to be of type"):
            construct_from_registry("adder", things, pre_validation_function=Stream)
        plugin = tmp_path / "plugin.py"
        plugin.write_text(
            "from streaming.base.stream import streams_registry\nstreams_registry.register('p', func=dict)\n"
        )
        import_file(plugin)
        assert streams_registry.get("p") is dict and things.description == "test things"
    with pytest.raises(catalogue.RegistryError):  # the block's registrations are undone
        streams_registry.get("p")
    with pytest.raises(FileNotFoundError):
        import_file(tmp_path / "missing.py")


# ----------------------------------------------------------------------------------------------------- distributed


def _gather_in_a_group(rank: int, port: int, results) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    from streaming.base.distributed import all_gather_object, maybe_init_dist

    initialised = maybe_init_dist()
    results.put((rank, initialised, all_gather_object({"rank": rank}), maybe_init_dist()))


def test_all_gather_object_gathers_from_every_rank_of_a_real_group():
    import multiprocessing
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    import torch.distributed  # noqa: F401 - loaded once here; the forked ranks inherit it instead of importing it

    context = multiprocessing.get_context("fork")
    results = context.Queue()
    procs = [context.Process(target=_gather_in_a_group, args=(rank, port, results)) for rank in range(2)]
    for proc in procs:
        proc.start()
    gathered = sorted(results.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(60)
    # Each rank initialised the group itself (gloo on CPU), got every rank's object in rank order, and a second
    # call finds the group there already.
    assert gathered == [(rank, True, [{"rank": 0}, {"rank": 1}], False) for rank in range(2)]


def test_all_gather_object_and_maybe_init_dist(monkeypatch):
    from streaming.base.distributed import all_gather_object, maybe_init_dist

    monkeypatch.setenv("WORLD_SIZE", "1")
    assert all_gather_object({"a": 1}) == [{"a": 1}] and maybe_init_dist() is False
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match=r"world_size\(2\) > 1"):
        all_gather_object(1)


# ---------------------------------------------------------------------------------------------------------- Stream


def test_stream_weights_shards_and_local_setup(tmp_path):
    from streaming.base.stream import Stream
    from streaming.base.world import World

    streams = [Stream(local="/a", proportion=0.75), Stream(local="/b", proportion=0.25)]
    assert Stream.validate_weights(streams) == (True, False)
    assert Stream.apply_weights(streams, np.array([100, 100]), 40, seed=0) == 40
    assert (streams[0].choose, streams[1].choose) == (30, 10) and streams[0].repeat == 0.3
    absolute = [Stream(local="/a", repeat=2), Stream(local="/b", choose=5)]
    assert Stream.validate_weights(absolute) == (False, False)
    assert Stream.apply_weights(absolute, np.array([10, 20]), None, seed=0) == 25
    with pytest.raises(ValueError, match="cannot be mixed"):
        Stream.validate_weights([Stream(local="/a", proportion=1), Stream(local="/b", repeat=1)])

    out = str(tmp_path / "ds")
    with MDSWriter(out=out, columns={"x": "pkl"}, compression="zstd", size_limit=1 << 8) as writer:
        for i in range(40):
            writer.write({"x": i})
    stream = Stream(local=out)
    world = World(num_nodes=1, ranks_per_node=1, workers_per_rank=1, worker=0)
    with pytest.raises(ValueError, match="pkl"):
        stream.get_shards(world, allow_unsafe_types=False)
    shards = stream.get_shards(world, allow_unsafe_types=True)
    assert len(shards) > 1 and sum(len(s) for s in shards) == 40
    usage = np.zeros(len(shards), np.int64)
    stream.set_up_local(shards, usage)  # local is the only copy: compressed files are kept
    assert usage.tolist() == [s.get_zip_size() for s in shards]
    assert stream.prepare_shard(shards[0]) == shards[0].get_raw_size() and shards[0][0] == {"x": 0}
