"""Exercise upstream's extension points in whichever ``streaming`` this interpreter imports; print one JSON line.

Run by test_extension_points.py once with this package and once with the reference (streaming-community 0.14.2),
each in a fresh folder given as the only argument; each probe records what it saw, or the error it raised.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from streaming import LocalDataset, MDSWriter, Stream, StreamingDataLoader, StreamingDataset
from streaming.base.format.mds.encodings import Encoding, _encodings
from streaming.base.shuffle import algos as shuffle_algos
from streaming.base.stream import streams_registry

FOLDER = Path(sys.argv[1])
NUM = 60


def dataset_of(name: str, size_limit: int = 120) -> str:
    out = FOLDER / name
    with MDSWriter(out=str(out), columns={"id": "int"}, size_limit=size_limit) as writer:
        for i in range(NUM):
            writer.write({"id": i})
    return str(out)


def ids(dataset: Any) -> list[int]:
    return [int(sample["id"]) for sample in dataset]


def stream_config() -> Any:
    class Configured(Stream):
        def __init__(self, *, tag: str = "none", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.tag = tag

    streams_registry.register("configured", func=Configured)
    dataset = StreamingDataset(
        local=dataset_of("configured"), batch_size=4, stream_name="configured", stream_config={"tag": "seen"}
    )
    return [type(dataset.streams[0]).__name__, dataset.streams[0].tag, len(ids(dataset))]


def decorator_registration() -> Any:
    @streams_registry.register("decorated")
    class Decorated(Stream):
        pass

    dataset = StreamingDataset(local=dataset_of("decorated"), batch_size=4, stream_name="decorated")
    return [type(dataset.streams[0]).__name__, len(ids(dataset))]


def entry_point() -> Any:
    # The entry point's module and dist-info are on PYTHONPATH (written by the test before this interpreter started).
    dataset = StreamingDataset(local=dataset_of("entry"), batch_size=4, stream_name="probe_entry_point")
    return [type(dataset.streams[0]).__name__, len(ids(dataset))]


def stream_hooks() -> Any:
    called: set[str] = set()

    class Hooked(Stream):
        def apply_default(self, default: dict) -> None:
            called.add("apply_default")
            super().apply_default(default)

        def get_shards(self, world: Any, allow_unsafe_types: bool) -> Any:
            called.add("get_shards")
            return super().get_shards(world, allow_unsafe_types)

        def prepare_shard(self, shard: Any) -> int:
            called.add("prepare_shard")
            return super().prepare_shard(shard)

    stream = Hooked(remote=dataset_of("hooked"), local=str(FOLDER / "hooked-cache"))
    dataset = StreamingDataset(streams=[stream], batch_size=4, shuffle=True)
    every_sample = sorted(ids(dataset)) == list(range(NUM))
    return [sorted(called), every_sample]


def get_shards_filter() -> Any:
    class FirstHalf(Stream):
        """Keeps the first half of the index's shards, as a stream that filters its index does."""

        def get_shards(self, world: Any, allow_unsafe_types: bool) -> Any:
            shards = super().get_shards(world, allow_unsafe_types)
            return shards[: len(shards) // 2]

    stream = FirstHalf(remote=dataset_of("filtered"), local=str(FOLDER / "filtered-cache"))
    dataset = StreamingDataset(streams=[stream], batch_size=4)
    return [dataset.num_samples, ids(dataset)]


def custom_encoding() -> Any:
    class UInt16(Encoding):
        def encode(self, obj: Any) -> bytes:
            return np.asarray(obj, np.uint16).tobytes()

        def decode(self, data: bytes) -> Any:
            return np.frombuffer(data, np.uint16)

    _encodings["uint16"] = UInt16
    out = str(FOLDER / "encoded")
    with MDSWriter(out=out, columns={"x": "uint16"}, size_limit=64) as writer:
        for i in range(9):
            writer.write({"x": np.arange(i, i + 3)})
    streamed = [sample["x"].tolist() for sample in StreamingDataset(local=out, batch_size=3)]
    local = LocalDataset(local=out)[4]["x"]
    return [streamed, local.tolist(), str(local.dtype), json.loads((Path(out) / "index.json").read_text())]


def custom_shuffle() -> Any:
    def reverse(num_samples: Any, num_canonical_nodes: int, seed: int, epoch: int, block_size: int = 1) -> Any:
        return np.arange(sum(num_samples) - 1, -1, -1, dtype=np.int64)

    shuffle_algos["probe_reverse"] = reverse
    dataset = StreamingDataset(
        local=dataset_of("shuffled"), batch_size=4, shuffle=True, shuffle_algo="probe_reverse", num_canonical_nodes=1
    )
    return ids(dataset)


def state_dict_override() -> Any:
    class Packed(StreamingDataset):
        """llm-foundry's StreamingFinetuningDataset: each yielded sample stands for two stored ones."""

        def state_dict(self, num_samples: int, from_beginning: bool) -> dict[str, Any]:
            return super().state_dict(num_samples * 2, from_beginning)

    dataset = Packed(local=dataset_of("packed"), batch_size=4, num_canonical_nodes=1)
    loader = StreamingDataLoader(dataset, batch_size=4)
    for index, _ in enumerate(loader):
        if index == 2:
            break
    return loader.state_dict()


PROBES: dict[str, Callable[[], Any]] = {
    "stream_config": stream_config,
    "decorator_registration": decorator_registration,
    "entry_point": entry_point,
    "stream_hooks": stream_hooks,
    "get_shards_filter": get_shards_filter,
    "custom_encoding": custom_encoding,
    "custom_shuffle": custom_shuffle,
    "state_dict_override": state_dict_override,
}


def main() -> None:
    results: dict[str, Any] = {}
    for name, probe in PROBES.items():
        try:
            results[name] = {"result": probe()}
        except Exception as error:
            results[name] = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
