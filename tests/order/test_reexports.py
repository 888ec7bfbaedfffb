"""Upstream import paths (`streaming.base.*`) resolve to this package's order engine."""

import importlib

import pytest

from streaming.dataset import batching, partition, sampling, shuffle, world

PATHS = {
    "streaming.base.world": {"World": world.World},
    "streaming.base.sampling": {"get_sampling": sampling.get_sampling},
    "streaming.base.partition": {
        "get_partitions": partition.get_partitions,
        "get_partitions_orig": partition.get_partitions_orig,
        "get_partitions_relaxed": partition.get_partitions_relaxed,
        "algos": partition.partition_algos,
    },
    "streaming.base.partition.orig": {"get_partitions_orig": partition.get_partitions_orig},
    "streaming.base.partition.relaxed": {"get_partitions_relaxed": partition.get_partitions_relaxed},
    "streaming.base.shuffle": {
        "get_shuffle": shuffle.get_shuffle,
        "algos": shuffle.shuffle_algos,
        **{f"get_shuffle_{algo}": fn for algo, fn in shuffle.shuffle_algos.items()},
    },
    "streaming.base.shuffle.naive": {"get_shuffle_naive": shuffle.get_shuffle_naive},
    "streaming.base.shuffle.py1br": {"get_shuffle_py1br": shuffle.get_shuffle_py1br},
    "streaming.base.shuffle.py1e": {"get_shuffle_py1e": shuffle.get_shuffle_py1e},
    "streaming.base.shuffle.py1s": {"get_shuffle_py1s": shuffle.get_shuffle_py1s, "divide_spans": shuffle.divide_spans},
    "streaming.base.shuffle.py2s": {"get_shuffle_py2s": shuffle.get_shuffle_py2s},
    "streaming.base.batching": {"generate_work": batching.generate_work, "batching_methods": batching.batching_methods},
    "streaming.base.batching.random": {"generate_work_random_batching": batching.generate_work_random_batching},
    "streaming.base.batching.stratified": {
        "generate_work_stratified_batching": batching.generate_work_stratified_batching
    },
    "streaming.base.batching.per_stream": {
        "generate_work_per_stream_batching": batching.generate_work_per_stream_batching
    },
    "streaming.base.batching.device_per_stream": {
        "generate_work_device_per_stream_batching": batching.generate_work_device_per_stream_batching
    },
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_upstream_path(path):
    module = importlib.import_module(path)
    assert sorted(module.__all__) == sorted(PATHS[path])
    for name, value in PATHS[path].items():
        assert getattr(module, name) is value
