"""`MappedStreamingDataset`: a StreamingDataset whose samples pass through one function, by index and when iterated.

Upstream's dataset classes (the text, vision and WebVid ones) turn each stored sample into what the model takes by
overriding ``get_item``; here that step is ``map_sample``, applied both by ``ds[i]`` and by ``iter(ds)`` (whose
fast path reads shards directly rather than through ``get_item``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streaming.dataset.dataset import StreamingDataset


class MappedStreamingDataset(StreamingDataset):
    """Subclasses implement ``map_sample(sample)``; ``get_item`` and iteration return what it returns."""

    def map_sample(self, sample: dict[str, Any]) -> Any:
        """Turn one stored sample into what this dataset yields."""
        return sample

    def get_item(self, idx: int, retry: int = 7) -> Any:
        return self.map_sample(super().get_item(idx, retry))

    def __iter__(self) -> Iterator[Any]:
        return map(self.map_sample, super().__iter__())
