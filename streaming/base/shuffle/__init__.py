"""Upstream import path `streaming.base.shuffle`."""

from streaming.dataset.shuffle import (
    get_shuffle,
    get_shuffle_naive,
    get_shuffle_py1br,
    get_shuffle_py1e,
    get_shuffle_py1s,
    get_shuffle_py2s,
)
from streaming.dataset.shuffle import shuffle_algos as algos

__all__ = [
    "algos",
    "get_shuffle",
    "get_shuffle_naive",
    "get_shuffle_py1br",
    "get_shuffle_py1e",
    "get_shuffle_py1s",
    "get_shuffle_py2s",
]
