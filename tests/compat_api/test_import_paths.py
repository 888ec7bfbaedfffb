"""Upstream's public import paths keep working, and importing the formats pulls in no heavy dependency."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PATHS = {
    "streaming": [
        "MDSWriter",
        "JSONWriter",
        "CSVWriter",
        "TSVWriter",
        "XSVWriter",
        "LocalDataset",
        "Stream",
        "StreamingDataset",
        "StreamingDataLoader",
    ],
    "streaming.base": ["MDSWriter", "StreamingDataset", "LocalDataset"],
    "streaming.base.format": ["MDSWriter", "reader_from_json", "get_index_basename", "FileInfo", "Reader"],
    "streaming.base.format.mds.encodings": [
        "Encoding",
        "_encodings",
        "mds_encode",
        "mds_decode",
        "get_mds_encodings",
        "is_mds_encoding",
        "get_mds_encoded_size",
    ],
    "streaming.base.format.json.encodings": ["is_json_encoded", "is_json_encoding"],
    "streaming.base.format.xsv.encodings": ["is_xsv_encoding", "xsv_decode", "xsv_encode"],
    "streaming.base.compression": ["compress", "decompress", "get_compressions", "is_compression"],
    "streaming.base.hashing": ["get_hash", "get_hashes", "is_hash"],
    "streaming.base.util": [
        "bytes_to_int",
        "number_abbrev_to_int",
        "get_list_arg",
        "merge_index",
        "retry",
        "clean_stale_shared_memory",
        "wait_for_file_to_exist",
    ],
    "streaming.base.partition": ["get_partitions"],
    "streaming.base.shuffle": ["get_shuffle"],
    "streaming.base.sampling": ["get_sampling"],
    "streaming.base.batching": ["generate_work"],
    "streaming.base.world": ["World"],
    "streaming.base.stream": ["Stream", "streams_registry"],
    "streaming.base.dataset": ["StreamingDataset"],
    "streaming.base.dataloader": ["StreamingDataLoader"],
    "streaming.base.local": ["LocalDataset"],
    "streaming.base.array": ["Array"],
    "streaming.base.spanner": ["Spanner"],
    "streaming.base.distributed": ["get_rank", "get_world_size", "get_local_rank", "get_local_world_size", "barrier"],
    "streaming.base.storage": ["CloudUploader", "CloudDownloader", "LocalUploader"],
    "streaming.base.converters": ["dataframe_to_mds", "SPARK_TO_MDS", "infer_dataframe_schema", "is_json_compatible"],
}


@pytest.mark.parametrize("module", sorted(PATHS))
def test_upstream_names_import(module):
    loaded = importlib.import_module(module)
    for name in PATHS[module]:
        assert hasattr(loaded, name), f"{module}.{name}"


def _run_fresh(script: str) -> str:
    """What ``script`` prints in a fresh interpreter, stripped (it must exit 0)."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()


def test_writing_and_reading_import_no_heavy_dependency(tmp_path):
    script = (
        "import sys\n"
        "from streaming import MDSWriter, LocalDataset\n"
        f"w = MDSWriter(out={str(tmp_path / 'd')!r}, columns={{'x': 'int'}}, compression='zstd')\n"
        "w.write({'x': 1}); w.finish()\n"
        f"assert LocalDataset({str(tmp_path / 'd')!r})[0] == {{'x': 1}}\n"
        "heavy = [m for m in ('torch', 'pyspark', 'boto3', 'google.cloud', 'azure', 'oci', 'databricks', 'pandas',"
        " 'pyarrow') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    assert _run_fresh(script) == "[]"


def test_distributed_helpers_read_the_torchrun_environment(monkeypatch):
    from streaming.base.distributed import get_local_world_size, get_rank, get_world_size

    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert (get_rank(), get_world_size(), get_local_world_size()) == (3, 8, 4)


def test_a_shuffled_evicting_epoch_does_not_import_numpy_masked_arrays(tmp_path):
    # numpy 2's `np.unique` imports numpy.ma on first use (0.1 s), which every DataLoader worker paid before its
    # first shuffled batch, and every process evicting its first shard. numpy 1.x (the Spark 3.5 runtimes') imports
    # it with numpy itself: what counts is that the epoch adds nothing to what `import numpy` loads.
    remote, local = str(tmp_path / "remote"), str(tmp_path / "local")
    script = (
        "import sys\n"
        "import numpy\n"
        "with_numpy = 'numpy.ma' in sys.modules\n"
        "from streaming import MDSWriter, StreamingDataset\n"
        f"with MDSWriter(out={remote!r}, columns={{'x': 'int', 'pad': 'bytes'}}, size_limit=1 << 12) as w:\n"
        "    for i in range(400): w.write({'x': i, 'pad': bytes(100)})\n"
        f"ds = StreamingDataset(remote={remote!r}, local={local!r}, shuffle=True, batch_size=4, cache_limit=40000)\n"
        "assert sorted(s['x'] for s in ds) == list(range(400))\n"
        "assert ds._shard_cache.usage <= 40000\n"
        "print(with_numpy, 'numpy.ma' in sys.modules)\n"
    )
    with_numpy, after_the_epoch = _run_fresh(script).split()
    assert after_the_epoch == with_numpy
