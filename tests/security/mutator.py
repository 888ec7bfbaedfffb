"""A seeded mutation fuzzer: random byte-level and JSON-tree edits of seed inputs.

Hypothesis spends about a millisecond drawing each structured input, a hundred times what our parsers take
to refuse one; mutating valid seeds with `random.Random` costs microseconds and starts from inputs that
reach deep into the parsers (a valid header with one bad offset, an index with one absurd field).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

#: Boundary values for 32-bit fields: the MDS header's sample count and offsets, the encodings' length fields.
_U32_EDGES = (0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF)
_INT_EDGES = (0, -1, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**63, 2**64, 2**65, -(2**63), 1 << 40)
_TEXT_EDGES = ("", "..", "../x", "/abs", "a\\b", "a\x00b", "s3://b/k", "shard.00000.mds", "\u00e9", "%2e")


def mutate_bytes(data: bytes, rng: random.Random, pool: Sequence[bytes] = ()) -> bytes:
    """``data`` after one to four random edits: bit flips, overwrites, edge-value u32s, inserts, cuts, runs, splices."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        at = rng.randint(0, len(buf))
        if op == 0 and buf:
            buf[min(at, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[min(at, len(buf) - 1)] = rng.randrange(256)
        elif op == 2:
            word = rng.choice(_U32_EDGES).to_bytes(4, "little")
            at -= at % 4 if rng.random() < 0.7 else 0  # mostly on a field boundary
            buf[at : at + 4] = word
        elif op == 3:
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 4:
            del buf[at : at + rng.randint(1, 16)]
        elif op == 5:
            del buf[at:]
        elif op == 7:
            run = rng.choice(b"[{\x00\xff" + bytes(buf[at : at + 1]))  # deep JSON nesting, long runs
            buf[at:at] = bytes([run]) * rng.choice([2, 100, 5000])
        elif op == 6 and pool:
            other = rng.choice(pool)
            start = rng.randint(0, len(other))
            buf[at:] = other[start : start + rng.randint(1, 64)]
        else:
            start = rng.randint(0, len(buf))
            buf[at:at] = buf[start : start + rng.randint(1, 16)]  # a repeated chunk
    return bytes(buf)


def _nodes(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every value inside a JSON tree (the root is ``()``)."""
    paths = [path]
    if isinstance(obj, dict):
        for key, value in obj.items():
            paths.extend(_nodes(value, (*path, key)))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            paths.extend(_nodes(value, (*path, index)))
    return paths


def _replacement(rng: random.Random, tree: Any) -> Any:
    kind = rng.randrange(7)
    if kind == 0:
        return rng.choice(_INT_EDGES)
    if kind == 1:
        return rng.choice(_TEXT_EDGES)
    if kind == 2:
        return rng.choice([None, True, False, 1.5, float("inf")])
    if kind == 3:
        return rng.choice([[], {}, [None], {"": None}])
    if kind == 4:
        # Deeper nesting is made as text (`mutate_bytes`): three of these in one tree stay within Python's
        # recursion limit for the tree walk and the copy.
        depth = rng.choice([2, 32, 150])
        return json.loads("[" * depth + "]" * depth)
    if kind == 5:
        return _copy(_get(tree, rng.choice(_nodes(tree))))  # a value from elsewhere in the tree
    return rng.randint(-(2**34), 2**34)


def _copy(tree: Any) -> Any:
    # The C JSON codec copies a JSON tree several times faster than copy.deepcopy, with one frame per level.
    return json.loads(json.dumps(tree))


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def mutate_json(tree: Any, rng: random.Random) -> Any:
    """A copy of the JSON ``tree`` with one to three values replaced, removed, or duplicated."""
    tree = _copy(tree)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_nodes(tree))
        if not path:
            tree = _replacement(rng, tree)
            continue
        parent = _get(tree, path[:-1])
        op = rng.randrange(4)
        if op == 0 and isinstance(parent, dict):
            del parent[path[-1]]
        elif op == 0:
            parent.pop(path[-1])
        elif op == 1 and isinstance(parent, list):
            parent.insert(path[-1], _copy(parent[path[-1]]))
        else:
            parent[path[-1]] = _replacement(rng, tree)
    return tree


def _random_char(rng: random.Random) -> str:
    """Mostly printable ASCII, else any code point but a lone surrogate (no decoded text holds one)."""
    if rng.random() < 0.7:
        return chr(rng.randrange(32, 127))
    point = rng.randrange(0x10FFFF - 0x800)
    return chr(point if point < 0xD800 else point + 0x800)


def mutate_text(text: str, rng: random.Random, tokens: Sequence[str]) -> str:
    """``text`` after one to three edits: a token or random character inserted, a slice removed or repeated."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(text))
        op = rng.randrange(4)
        if op == 0:
            text = text[:at] + rng.choice(tokens) + text[at:]
        elif op == 1:
            text = text[:at] + _random_char(rng) + text[at:]
        elif op == 2:
            text = text[:at] + text[at + rng.randint(1, 6) :]
        else:
            start = rng.randint(0, len(text))
            text = text[:at] + text[start : start + rng.randint(1, 8)] + text[at:]
    return text
