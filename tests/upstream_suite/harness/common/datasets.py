"""Synthetic sample sources imported by the reference's test modules as ``tests.common.datasets``."""

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from streaming import MDSWriter


class SequenceDataset:
    """Samples ``{'id': f'{i:06}', 'sample': 3 * i + offset}`` for ``i`` in ``range(size)``.

    Indexable and a one-pass iterator, with the column encodings (``str``, ``int``) and sizes an MDS writer uses.
    """

    def __init__(self, size: int = 100, column_names: list[str] | None = None, offset: int = 0) -> None:
        self.size = size
        self.offset = offset
        self.column_names = list(column_names or ["id", "sample"])
        self.column_encodings = ["str", "int"]
        self.column_sizes: list[int | None] = [None, 8]
        self._position = 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.size:
            raise IndexError(f"Sample {index} is out of range for {self.size} samples")
        id_name, value_name = self.column_names
        return {id_name: f"{index:06}", value_name: 3 * index + self.offset}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._position >= self.size:
            raise StopIteration
        self._position += 1
        return self[self._position - 1]

    def get_sample_in_bytes(self, index: int) -> dict[str, Any]:
        """The sample as the bytes an MDS shard stores: UTF-8 id, 8-byte native int64 value."""
        id_name, value_name = self.column_names
        sample = self[index]
        return {id_name: sample[id_name].encode("utf-8"), value_name: np.int64(sample[value_name]).tobytes()}


class NumberAndSayDataset:
    """``size`` random integers (seeded through numpy's global generator) and their English spelling.

    Setting ``seed`` reseeds ``np.random``; numbers are drawn as the samples are iterated.
    """

    _ONES = (
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen"
    ).split()
    _TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()

    def __init__(self, size: int = 100, column_names: list[str] | None = None, seed: int = 987) -> None:
        self.size = size
        self.column_names = list(column_names or ["number", "words"])
        self.column_encodings = ["int", "str"]
        self.column_sizes: list[int | None] = [8, None]
        self._position = 0
        self.seed = seed

    @property
    def seed(self) -> int:
        return self._seed

    @seed.setter
    def seed(self, value: int) -> None:
        self._seed = value
        np.random.seed(value)

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._position >= self.size:
            raise StopIteration
        self._position += 1
        number = self._draw()
        number_name, words_name = self.column_names
        return {number_name: number, words_name: " ".join(self._spell(number))}

    @staticmethod
    def _draw() -> int:
        sign = 1 if np.random.random() < 0.8 else -1
        magnitude = 10 ** np.random.uniform(1, 4) - 10
        return sign * int(magnitude**2)

    def _spell(self, number: int) -> list[str]:
        if number < 0:
            return ["negative", *self._spell(-number)]
        if number < 20:
            return [self._ONES[number]]
        if number < 100:
            tens, ones = divmod(number, 10)
            return [self._TENS[tens - 2], *([self._ONES[ones]] if ones else [])]
        for scale, word in ((1_000_000, "million"), (1_000, "thousand"), (100, "hundred")):
            if number >= scale:
                head, rest = divmod(number, scale)
                return [*self._spell(head), word, *(self._spell(rest) if rest else [])]
        raise AssertionError(number)


def write_mds_dataset(
    out_root: str,
    columns: dict[str, str],
    samples: Iterable[dict[str, Any]],
    size_limit: int,
    compression: str | None = None,
    hashes: list[str] | None = None,
) -> None:
    """Write ``samples`` to ``out_root`` with one MDSWriter."""
    with MDSWriter(
        out=out_root, columns=columns, compression=compression, hashes=hashes, size_limit=size_limit
    ) as writer:
        for sample in samples:
            writer.write(sample)
