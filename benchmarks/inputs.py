"""Deterministic synthetic samples for the benchmark schemas, generated once and cached on disk.

Three schemas, each with one int "key" per sample so readers can verify what they got:
  tokens  {'tokens': 'ndarray:int32'}        2048 Zipf-like token ids (8 KiB); key = first+last id
  text    {'text': 'str', 'id': 'int'}       ~1 KiB of random words; key = id
  jpeg    {'image': 'bytes', 'class': 'int'} a unique 64x64 JPEG, pre-encoded; key = size and class

Generating these takes seconds, so `ensure` writes them under the inputs directory once per
(schema, n) and `samples` loads them back fully into memory. Runs under any interpreter with numpy
(and Pillow for jpeg), so the reference and the project produce identical inputs.
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

SCHEMAS = ("tokens", "text", "jpeg")
COLUMNS = {
    "tokens": {"tokens": "ndarray:int32"},
    "text": {"text": "str", "id": "int"},
    "jpeg": {"image": "bytes", "class": "int"},
}
SEQ_LEN = 2048
VOCAB = 50257
TEXT_CHARS = 1024
IMAGE_SIDE = 64
GENERATOR_VERSION = 1


def _check_schema(schema: str) -> None:
    if schema not in COLUMNS:
        raise ValueError(f"unknown schema {schema!r}; valid schemas: {', '.join(SCHEMAS)}")


def _path(root: str, schema: str, n: int) -> str:
    suffix = "npy" if schema == "tokens" else "npz"
    return os.path.join(root, f"{schema}-v{GENERATOR_VERSION}-{n}.{suffix}")


def _tokens(n: int) -> np.ndarray:
    # Inverse-CDF Pareto draw, tail exponent 1.2: Zipf-like ids, so zstd sees text-like redundancy.
    rng = np.random.default_rng(20_480)
    out = np.empty((n, SEQ_LEN), np.int32)
    for start in range(0, n, 4096):
        stop = min(n, start + 4096)
        uniform = rng.random((stop - start, SEQ_LEN), dtype=np.float32)
        out[start:stop] = np.minimum((1.0 - uniform) ** -5.0, VOCAB - 1)
    return out


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(1_024)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    lengths = rng.integers(2, 10, size=4096)
    words = [letters[rng.integers(0, 26, size=k)].tobytes().decode() for k in lengths]
    picks = rng.integers(0, len(words), size=(n, TEXT_CHARS // 4))
    return [" ".join(words[k] for k in row)[:TEXT_CHARS] for row in picks]


def _jpegs(n: int) -> list[bytes]:
    from PIL import Image

    rng = np.random.default_rng(6_464)
    yy, xx = np.mgrid[0:IMAGE_SIDE, 0:IMAGE_SIDE].astype(np.float32)
    bases = []
    for k in range(32):
        fx, fy, fd = rng.uniform(0.02, 0.3, size=3)
        bases.append(np.stack([np.sin(xx * fx + k), np.cos(yy * fy - k), np.sin((xx + yy) * fd)], axis=-1) * 60 + 128)
    encoded = []
    for i in range(n):
        noise = rng.integers(-20, 21, size=(IMAGE_SIDE, IMAGE_SIDE, 3))
        pixels = np.clip(bases[i % len(bases)] + noise, 0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=75)
        encoded.append(buffer.getvalue())
    return encoded


def _save(path: str, schema: str, n: int) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        if schema == "tokens":
            np.save(f, _tokens(n))
        else:
            items = [t.encode() for t in _texts(n)] if schema == "text" else _jpegs(n)
            offsets = np.cumsum([0] + [len(b) for b in items], dtype=np.int64)
            np.savez(f, blob=np.frombuffer(b"".join(items), np.uint8), offsets=offsets)
    os.replace(tmp, path)


def ensure(root: str, schema: str, n: int) -> str:
    """Create the cached inputs for (schema, n) under root if missing; return the file path."""
    _check_schema(schema)
    path = _path(root, schema, n)
    if not os.path.exists(path):
        os.makedirs(root, exist_ok=True)
        _save(path, schema, n)
    return path


def _items(path: str) -> list[bytes]:
    with np.load(path) as arrays:
        blob = arrays["blob"].tobytes()
        offsets = arrays["offsets"].tolist()
    return [blob[a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def samples(root: str, schema: str, n: int) -> tuple[list[dict[str, Any]], int]:
    """Load the n samples of a schema (generating them if needed) and their payload bytes."""
    path = ensure(root, schema, n)
    if schema == "tokens":
        tokens = np.load(path)
        return [{"tokens": row} for row in tokens], int(tokens.nbytes)
    items = _items(path)
    if schema == "text":
        rows = [{"text": b.decode(), "id": i} for i, b in enumerate(items)]
    else:
        rows = [{"image": b, "class": i % 1000} for i, b in enumerate(items)]
    return rows, sum(len(b) + 8 for b in items)


def key_of(schema: str, sample: dict[str, Any]) -> int:
    """The verification key of one sample as returned by a reader."""
    if schema == "tokens":
        tokens = sample["tokens"]
        return int(tokens[0]) * VOCAB + int(tokens[-1])
    if schema == "text":
        return int(sample["id"])
    return len(sample["image"]) * 1000 + int(sample["class"])


def expected_keys(root: str, schema: str, n: int) -> list[int]:
    """The verification keys of samples 0..n-1 in write order."""
    path = ensure(root, schema, n)
    if schema == "tokens":
        tokens = np.load(path, mmap_mode="r")
        return (tokens[:, 0].astype(np.int64) * VOCAB + tokens[:, -1]).tolist()
    if schema == "text":
        return list(range(n))
    with np.load(path) as arrays:
        sizes = np.diff(arrays["offsets"])
    return (sizes * 1000 + np.arange(n) % 1000).tolist()
