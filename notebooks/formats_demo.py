# Databricks notebook source
# MAGIC %md
# MAGIC # Write and read MDS shards with every encoding
# MAGIC Writes a small dataset that uses every MDS encoding, with zstd compression and two hashes, then reads it
# MAGIC back with `LocalDataset` and checks every value. Runs as is on Databricks or as `python formats_demo.py`.

# COMMAND ----------

import decimal
import io
import os
import sys
import tempfile
import time

import numpy as np
from PIL import Image

from streaming import LocalDataset, MDSWriter

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(prefix="mds-demo-"), "formats")

# COMMAND ----------

columns = {
    "bytes": "bytes",
    "str": "str",
    "int": "int",
    "pkl": "pkl",
    "json": "json",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
    "str_int": "str_int",
    "str_float": "str_float",
    "str_decimal": "str_decimal",
    "pil": "pil",
    "jpeg": "jpeg",
    "png": "png",
    "jpeg_array": "jpeg_array",
    "list_pil": "list[pil]",
    "list_jpeg": "list[jpeg]",
    "list_png": "list[png]",
    "tokens": "ndarray:int32",
    "matrix": "ndarray:float32:2,3",
    "anything": "ndarray",
}


def make_sample(i: int) -> dict:
    rng = np.random.default_rng(i)
    image = Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8))
    jpeg = io.BytesIO()
    image.save(jpeg, format="JPEG")
    return {
        "bytes": bytes([i % 256]) * 3,
        "str": f"sample {i}",
        "int": i,
        "pkl": {"i": i},
        "json": {"i": [i, i]},
        "uint8": i % 256,
        "uint16": i,
        "uint32": i,
        "uint64": i,
        "int8": -(i % 128),
        "int16": -i,
        "int32": -i,
        "int64": -i,
        "float16": i / 2,
        "float32": i / 4,
        "float64": i / 8,
        "str_int": i,
        "str_float": i + 0.5,
        "str_decimal": decimal.Decimal(f"{i}.10"),
        "pil": image,
        "jpeg": image,
        "png": image,
        "jpeg_array": [jpeg.getvalue()] * 2,
        "list_pil": [image],
        "list_jpeg": [image],
        "list_png": [image, image],
        "tokens": np.arange(i + 1, dtype=np.int32),
        "matrix": np.full((2, 3), i, dtype=np.float32),
        "anything": rng.integers(0, 9, (2, i % 3 + 1)).astype(np.int16),
    }


started = time.perf_counter()
with MDSWriter(out=out, columns=columns, compression="zstd", hashes=["sha1", "xxh64"], size_limit="64kb") as writer:
    for i in range(200):
        writer.write(make_sample(i))
print(f"wrote 200 samples in {len(writer.shards)} shards to {out} in {time.perf_counter() - started:.2f}s")

# COMMAND ----------

# The `pkl` column runs code when read, so a reader refuses it unless told the dataset is trusted: this one is, the
# cell above wrote it.
dataset = LocalDataset(out, allow_unsafe_types=True)
assert len(dataset) == 200
for i, sample in enumerate(dataset):
    expected = make_sample(i)
    assert sample["str"] == expected["str"] and sample["int"] == expected["int"]
    assert np.array_equal(sample["tokens"], expected["tokens"]) and sample["tokens"].dtype == np.int32
    assert sample["str_decimal"] == expected["str_decimal"] and sample["pkl"] == expected["pkl"]
    assert np.array_equal(np.asarray(sample["png"]), np.asarray(expected["png"]))
    assert sample["matrix"].shape == (2, 3) and sample["anything"].shape == expected["anything"].shape
print(f"read back and checked {len(dataset)} samples; dataset[-1]['str'] = {dataset[-1]['str']!r}")
