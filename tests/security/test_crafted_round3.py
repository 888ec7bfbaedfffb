"""Issue 34, attack 9: crafted shards and URLs on the batch path fail with our errors, naming what is wrong.

An ``ndarray`` value whose dimensions multiply past 2**64 (numpy's product wraps to a small number, then numpy
raised "array is too big" naming no file) and ``scheme://bucket//key`` (the empty segment was stripped, so the
backend was asked for ``key``).
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from streaming import MDSWriter, StreamingDataset
from streaming.storage.url import check_segments


def test_ndarray_dimensions_past_2_64_fail_naming_the_shard_on_the_batch_path(tmp_path):
    out = str(tmp_path / "ds")
    with MDSWriter(out=out, columns={"x": "ndarray:uint8"}) as writer:
        for _ in range(4):
            writer.write({"x": np.zeros((2, 7), np.uint8)})
    shard = os.path.join(out, "shard.00000.mds")
    with open(shard, "rb") as file:
        data = bytes(file.read())
    # A value: [shape header: ndim << 2 | width code] [dims] [values], 17 bytes here; the same 17 bytes can say
    # two 8-byte dimensions of 2**32, whose product wraps to 0 in numpy's uint64 (so "0 bytes of values").
    value = bytes((2 << 2 | 0, 2, 7)) + bytes(14)
    crafted = bytes((2 << 2 | 3,)) + struct.pack("<QQ", 1 << 32, 1 << 32)
    assert data.count(value) == 4 and len(crafted) == len(value)
    data = data.replace(value, crafted)
    with open(shard, "wb") as file:
        file.write(data)
    dataset = StreamingDataset(local=out, batch_size=4)
    with pytest.raises(ValueError, match="shard.00000.mds") as info:
        dataset.get_batch([0, 1, 2, 3])
    assert "too big" not in str(info.value)


@pytest.mark.parametrize("url", ["s3://bucket//key", "gs://bucket//a/b", "azure://acct/container//x"])
def test_an_empty_first_segment_is_refused_before_any_request(url):
    with pytest.raises(ValueError, match="empty"):
        check_segments(url)
