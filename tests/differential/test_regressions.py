"""Shrunk cases the differential suite found, replayed on every run (fixed ones as plain tests; known open
differences as strict xfails, which fail once the difference is fixed so that the entry gets removed)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.differential import operations
from tests.differential.compare import OPEN_DIFFERENCES, open_difference, result_difference
from tests.differential.test_errors import check_bad_case
from tests.differential.test_formats import check_dataset_case, write_both
from tests.differential.test_orders import check_function, check_plan

PLAN_DEFAULTS = {
    "batch_size": 1,
    "shuffle": False,
    "shuffle_algo": "naive",
    "shuffle_seed": 0,
    "num_canonical_nodes": None,
    "shuffle_block_size": None,
    "sampling_method": "balanced",
    "sampling_granularity": 1,
    "batching_method": "random",
    "partition_algo": "relaxed",
    "epoch_size": None,
}


def test_empty_mds_dataset(reference):
    """Allowed: the reference's LocalDataset cannot open a dataset without shards; the files are identical."""
    check_dataset_case(
        reference,
        {
            "writer": "mds",
            "columns": {"0": "bytes"},
            "samples": [],
            "compression": None,
            "hashes": [],
            "size_limit": None,
        },
    )


def test_png_of_a_palette_image(reference):
    from PIL import Image

    image = Image.frombytes("P", (1, 1), b"\x00")
    image.putpalette(bytes(range(256)) * 3)
    samples = [{"0": image, "1": b""}]
    check_dataset_case(
        reference,
        {
            "writer": "mds",
            "columns": {"0": "png", "1": "bytes"},
            "samples": samples,
            "compression": None,
            "hashes": [],
            "size_limit": None,
        },
    )


def test_png_of_a_32_bit_integer_image(reference):
    """Fixed: ours refused to store a mode I image as PNG; upstream stores it as I;16 (png and list[png])."""
    from PIL import Image

    image = Image.frombytes("I", (2, 1), np.array([70000, -5], "<i4").tobytes())
    samples = [{"0": image, "1": [image, image]}]
    case = {"writer": "mds", "columns": {"0": "png", "1": "list[png]"}, "samples": samples}
    check_dataset_case(reference, {**case, "compression": None, "hashes": [], "size_limit": None})


def test_partitions_of_an_empty_epoch(reference):
    """Allowed: the reference divides by zero, ours says why."""
    check_function(reference, "partitions", ["orig", 0, 1, 1, 1, 1, 1, 0, None])


def test_stream_without_samples_is_refused(reference, stream_folders):
    """Fixed: a dataset with one empty stream raised nothing in ours; the reference raises RuntimeError."""
    case = {
        "streams": [{"shard_sizes": [0]}, {"shard_sizes": [1]}],
        "dataset_kwargs": PLAN_DEFAULTS,
        "world": (1, 1, 1),
        "epoch": 0,
        "sample_in_epoch": 0,
    }
    check_plan(reference, stream_folders, case)


def test_stream_smaller_than_canonical_nodes_is_not_shuffled(reference, stream_folders):
    """Fixed: stratified/per_stream/device_per_stream shuffled (or refused) a stream with fewer samples than
    canonical nodes; the reference keeps it in order, and gives each stream a shuffle block of at least 1."""
    for method in ("stratified", "per_stream", "device_per_stream"):
        for algo in ("naive", "py1e"):
            kwargs = {**PLAN_DEFAULTS, "shuffle": True, "shuffle_algo": algo, "num_canonical_nodes": 4}
            case = {
                "streams": [{"shard_sizes": [3]}],
                "dataset_kwargs": {**kwargs, "batching_method": method},
                "world": (1, 1, 1),
                "epoch": 0,
                "sample_in_epoch": 0,
            }
            check_plan(reference, stream_folders, case)
    tiny_block = {**PLAN_DEFAULTS, "shuffle": True, "shuffle_block_size": 1, "batching_method": "device_per_stream"}
    case = {
        "streams": [{"shard_sizes": [4, 4], "proportion": 0.3}, {"shard_sizes": [5], "proportion": 0.7}],
        "dataset_kwargs": {**tiny_block, "num_canonical_nodes": 2},
        "world": (1, 1, 1),
        "epoch": 1,
        "sample_in_epoch": 0,
    }
    check_plan(reference, stream_folders, case)


def _open_plan_difference(reference, stream_folders, case) -> str | None:
    streams = [
        {"local": stream_folders.folder(position, stream["shard_sizes"])}
        for position, stream in enumerate(case["streams"])
    ]
    arguments = {**case, "streams": streams}
    ours, theirs = operations.epoch_plan(**arguments), reference.call("epoch_plan", **arguments)
    return result_difference(ours, theirs) and open_difference(ours, theirs)


def test_short_stream_with_per_stream_batching(reference, stream_folders):
    case = {
        "streams": [{"shard_sizes": [1]}, {"shard_sizes": [2]}],
        "dataset_kwargs": {**PLAN_DEFAULTS, "batch_size": 2, "batching_method": "per_stream"},
        "world": (1, 1, 1),
        "epoch": 0,
        "sample_in_epoch": 0,
    }
    assert _open_plan_difference(reference, stream_folders, case) is None


def _mds(columns, samples, **kwargs):
    return {
        "writer": "mds",
        "columns": columns,
        "samples": samples,
        "compression": None,
        "hashes": [],
        "size_limit": None,
        **kwargs,
    }


OPEN_WRITE_CASES = {
    "duplicate-hashes-refused": _mds({"0": "int"}, [{"0": 1}], hashes=["md5", "md5"]),
}


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(key, marks=pytest.mark.xfail(strict=True, reason=OPEN_DIFFERENCES[key][0]))
        for key in OPEN_WRITE_CASES
    ],
)
def test_open_error_differences(reference, key, tmp_path):
    _, _, ours, theirs = write_both(reference, OPEN_WRITE_CASES[key], str(tmp_path))
    assert open_difference(ours, theirs) == key, (ours, theirs)
    assert result_difference(ours, theirs, "write") is None


def test_every_open_difference_has_a_regression():
    assert set(OPEN_DIFFERENCES) == set(OPEN_WRITE_CASES)


def test_bad_arrays_fail_alike(reference):
    for array in (np.zeros(0, np.int32), np.array(5, np.int16), np.zeros(3, np.complex64)):
        check_bad_case(reference, {**_mds({"0": "ndarray"}, [{"0": array}]), "mutation": "array"})


def test_numpy_scalars_in_ndarray_columns_fail_alike(reference):
    """Found by the differential suite: a numpy scalar is checked as a 0-d array (ValueError), not as a wrong type."""
    for encoding, value in (
        ("ndarray:uint8:1", np.int64(7)),
        ("ndarray:uint8:1", np.uint8(7)),
        ("ndarray", np.int64(7)),
    ):
        check_bad_case(reference, {**_mds({"0": encoding}, [{"0": value}]), "mutation": "numpy-scalar"})


def test_lists_in_number_columns_fail_alike(reference):
    """Found by the differential suite: a list of two for a uint8 column failed with a TypeError here and the
    reference's KeyError (its encoded size check); ours is now both."""
    for encoding, value in (("uint8", [1, 2]), ("int32", [1, 2, 3]), ("float64", np.zeros(2))):
        check_bad_case(reference, {**_mds({"0": encoding}, [{"0": value}]), "mutation": "value"})


def test_ndarray_values_of_the_wrong_size_fail_alike(reference):
    """A stored ndarray whose bytes do not fill its shape exactly, short or long: both raise ValueError (ours
    used to take the first bytes of a long one, and raised numpy's TypeError for a short one)."""
    from streaming.base.format.mds.encodings import mds_encode

    for encoding, array in (
        ("ndarray:int32", np.arange(5, dtype=np.int32)),
        ("ndarray", np.arange(6, dtype=np.int16).reshape(2, 3)),
    ):
        value = mds_encode(encoding, array)
        for data in (value, value + bytes(4), value + bytes(2), value[:-4], value[:-1]):
            ours = operations.decode_value(encoding, data)
            theirs = reference.call("decode_value", encoding=encoding, data=data)
            assert result_difference(ours, theirs) is None, (encoding, len(value), len(data), ours, theirs)


def test_stored_values_of_the_wrong_size_or_text_decode_alike(reference):
    """Found by the generated decoding cases: a scalar of too few or too many bytes (ours raised struct.error; the
    reference reads numpy's first value or raises its ValueError/IndexError), number text that is not UTF-8 or has
    non-ASCII digits (ours parsed the bytes), an unknown ndarray dtype code (the reference's KeyError), a cut-off
    pil header (ours raised struct.error)."""
    cases = [
        ("int", b""),
        ("int", b"\x01\x02\x03"),
        ("int", bytes(range(16))),
        ("uint16", b"\x01"),
        ("float32", bytes(8)),
        ("int8", b""),
        ("str_int", "١٢".encode()),
        ("str_int", b"\x0b\xd53_"),
        ("str_float", b"\xba\xc2("),
        ("str_decimal", "١.5".encode()),
        ("str_decimal", b"\x02Hs\xcc\xadj4"),
        ("ndarray", b"\xf0\x04\x01"),
        ("pil", b""),
        ("pil", b"\x01\x00\x00\x00\x01"),
    ]
    for encoding, data in cases:
        ours = operations.decode_value(encoding, data)
        theirs = reference.call("decode_value", encoding=encoding, data=data)
        assert result_difference(ours, theirs) is None, (encoding, data, ours, theirs)
