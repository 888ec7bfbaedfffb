"""Upstream's extension points, each exercised by a subclass on every read path.

MosaicML Streaming's documented way to turn a stored sample into what a model takes is to subclass
``StreamingDataset`` and override ``__getitem__`` (llm-foundry's ``StreamingTextDataset`` and
``StreamingFinetuningDataset``) or ``get_item`` (upstream's dataset zoo); its iteration yields
``self[sample_id]``, so the override sees every sample. The stream registry (``streams_registry``,
``stream_name=``/``stream_config=``) builds a user's ``Stream`` subclass, which then receives the dataset's
defaults through ``apply_default`` and prepares shards through ``prepare_shard``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import catalogue
import pytest
from torch.utils.data import DataLoader

from streaming import MDSWriter, Stream, StreamingDataLoader, StreamingDataset
from streaming.base.registry_utils import save_registry
from streaming.base.stream import streams_registry

NUM = 120


@pytest.fixture
def remote(tmp_path):
    out = str(tmp_path / "remote")
    with MDSWriter(out=out, columns={"id": "int"}, size_limit=300) as writer:
        for i in range(NUM):
            writer.write({"id": i})
    return out


class ThroughGetItem(StreamingDataset):
    """llm-foundry's pattern: ``__getitem__`` reads the stored sample and reshapes it."""

    def __getitem__(self, idx):
        sample = super().__getitem__(idx)
        return {"seen": int(sample["id"]) * 10}


class ThroughGetItemMethod(StreamingDataset):
    """The dataset zoo's pattern: ``get_item`` transforms the stored sample."""

    def get_item(self, sample_id, retry=7):
        return {"seen": int(super().get_item(sample_id, retry)["id"]) * 10}


SUBCLASSES = [ThroughGetItem, ThroughGetItemMethod]
EXPECTED = sorted(i * 10 for i in range(NUM))


def _seen(batches):
    return sorted(int(value) for batch in batches for value in batch["seen"])


@pytest.mark.parametrize("cls", SUBCLASSES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize(
    "setup",
    ["local only", "from a remote", "under a cache limit"],
)
def test_iteration_yields_every_sample_through_the_override(tmp_path, remote, cls, setup):
    kwargs = {"local": remote} if setup == "local only" else {"remote": remote, "local": str(tmp_path / "cache")}
    if setup == "under a cache limit":
        kwargs["cache_limit"] = 20_000
    dataset = cls(batch_size=8, shuffle=True, **kwargs)
    assert sorted(sample["seen"] for sample in dataset) == EXPECTED
    assert dataset[3] == {"seen": 30}


@pytest.mark.parametrize("cls", SUBCLASSES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("loader", [DataLoader, StreamingDataLoader], ids=lambda c: c.__name__)
def test_every_batch_of_a_dataloader_goes_through_the_override(tmp_path, remote, cls, loader):
    dataset = cls(remote=remote, local=str(tmp_path / "cache"), batch_size=8, shuffle=True)
    assert _seen(loader(dataset, batch_size=8, num_workers=2)) == EXPECTED


def test_the_plain_class_keeps_the_direct_read_path(tmp_path, remote):
    from streaming.dataset.dataset import overrides_item_access

    assert not overrides_item_access(StreamingDataset)
    assert all(overrides_item_access(cls) for cls in SUBCLASSES)
    dataset = StreamingDataset(local=remote, batch_size=8)
    assert sorted(int(sample["id"]) for sample in dataset) == list(range(NUM))


def test_the_zoo_classes_transform_when_iterated(tmp_path):
    """Upstream's EnWiki dataset turns stored bytes into arrays in ``get_item``; iteration returns the same."""
    import numpy as np

    from streaming.text import StreamingEnWiki

    out = str(tmp_path / "enwiki")
    fields = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids"]
    fields += ["masked_lm_weights", "next_sentence_labels"]
    with MDSWriter(out=out, columns=dict.fromkeys(fields, "bytes")) as writer:
        for i in range(4):
            row = {name: np.arange(i, i + 4, dtype=np.int32).tobytes() for name in fields}
            row["masked_lm_positions"] = np.arange(4, dtype=np.int32).tobytes()
            row["masked_lm_weights"] = np.ones(4, np.float32).tobytes()
            writer.write(row)
    dataset = StreamingEnWiki(local=out, batch_size=2, num_canonical_nodes=1)
    iterated = list(dataset)
    assert [sorted(sample) for sample in iterated] == [sorted(dataset[i]) for i in range(4)]
    assert all(isinstance(sample["labels"], np.ndarray) for sample in iterated)


class CountingStream(Stream):
    """A stream class as a user registers it: takes the dataset's defaults, counts the shards it prepares."""

    prepared: list[int] = []

    def prepare_shard(self, shard):
        CountingStream.prepared.append(shard.samples)
        return super().prepare_shard(shard)


def test_a_registered_stream_class_is_built_and_its_hooks_run(tmp_path, remote):
    CountingStream.prepared = []
    with save_registry():
        streams_registry.register("counting", func=CountingStream)
        dataset = StreamingDataset(
            remote=remote, local=str(tmp_path / "cache"), batch_size=8, stream_name="counting", download_retry=5
        )
        assert type(dataset.streams[0]) is CountingStream
        assert dataset.streams[0].download_retry == 5  # the dataset's default, applied to the registered class
        assert sorted(int(sample["id"]) for sample in dataset) == list(range(NUM))
    assert sum(CountingStream.prepared) == NUM


def test_the_stream_entry_exists_right_after_import_and_survives_a_restored_registry():
    """llm-foundry's test fixture copies ``catalogue.REGISTRY`` before each test and restores it after."""
    script = textwrap.dedent(
        """
        import copy, catalogue
        saved = copy.deepcopy(catalogue.REGISTRY)
        import streaming
        from streaming.base.stream import streams_registry
        assert 'stream' in streams_registry.get_all(), streams_registry.get_all()
        catalogue.REGISTRY = saved
        catalogue.REGISTRY = copy.deepcopy(catalogue.REGISTRY)
        import sys
        print(sorted(name for name in ('torch', 'pyspark', 'boto3') if name in sys.modules))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"  # registering does not give up the lazy imports
    saved = copy.deepcopy(catalogue.REGISTRY)
    try:
        catalogue.REGISTRY = copy.deepcopy(saved)
        assert streams_registry.get("stream") is Stream
    finally:
        catalogue.REGISTRY = saved


@pytest.mark.parametrize("argument", ["shuffle_algo", "partition_algo"])
def test_an_unknown_algorithm_is_upstreams_key_error_and_a_value_error(remote, argument):
    with pytest.warns(UserWarning, match=f"Unknown {argument} 'py9'"):
        dataset = StreamingDataset(local=remote, batch_size=1, shuffle=True, **{argument: "py9"})
    with pytest.raises(KeyError, match="choose one of") as caught:
        next(iter(dataset))  # looked up when the first epoch's partition and shuffle are built, as upstream does
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith("Unknown")  # the message, not KeyError's quoted repr


def test_version_compares_as_the_release_it_stands_in_for():
    import importlib.metadata

    import streaming

    assert streaming.__version__ == "0.14.2"
    assert streaming.__mds_version__ == importlib.metadata.version("mds-streaming")


# ---------------------------------------------------------------------------------------------------------------
# The same extension points in this package and in the reference, side by side (extension_probe.py runs in both).
# Upstream documents: subclassing StreamingDataset (``__getitem__``/``get_item``, above), registering a Stream
# subclass (``streams_registry.register``, as a decorator too, or the ``streaming_streams_registry`` entry-point
# group) built from ``stream_name``/``stream_config``, the Stream hooks its dataset calls (``apply_default``,
# ``get_shards``, ``prepare_shard``), MDS encodings added to ``_encodings``, shuffle algorithms added to
# ``streaming.base.shuffle.algos``, and a subclass's ``state_dict`` (llm-foundry scales its sample count) as
# StreamingDataLoader checkpoints it.

PROBE = Path(__file__).with_name("extension_probe.py")
ENTRY_POINT_MODULE = """
from streaming import Stream


class EntryPointStream(Stream):
    pass
"""


#: Upstream picks a /dev/shm prefix by looking and then creating without a retry, so a dataset another process
#: builds in between (the lanes run at once) makes it fail on a name like /000565_locals: the host's race, not the
#: probe's result, and the probes run again.
SHM_RACE = re.compile(r"FileExistsError: .*'/\d{6}_\w+'")
SHM_RACE_ATTEMPTS = 4


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """Each package's probe results, by probe name; an installed distribution declares the entry-point stream."""
    from tests.differential.reference import reference_python

    site = tmp_path_factory.mktemp("entry-point-site")
    (site / "probe_entry_stream.py").write_text(ENTRY_POINT_MODULE)
    dist_info = site / "probe_entry_stream-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-entry-stream\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[streaming_streams_registry]\nprobe_entry_point = probe_entry_stream:EntryPointStream\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(site)}
    results = {}
    for side, python in (("ours", sys.executable), ("reference", reference_python())):
        for _ in range(SHM_RACE_ATTEMPTS):
            folder = tmp_path_factory.mktemp(side)
            run = subprocess.run(
                [python, str(PROBE), str(folder)],
                cwd=folder,
                env=environment,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert run.returncode == 0, f"{side}: {run.stderr[-3000:]}"
            results[side] = json.loads(run.stdout.strip().splitlines()[-1])
            if not any(SHM_RACE.search(str(probe.get("error", ""))) for probe in results[side].values()):
                break
    return results


def _same_on_both(probed, name):
    reference, ours = probed["reference"][name], probed["ours"][name]
    assert "error" not in reference, reference.get("traceback")
    assert "error" not in ours, ours.get("traceback")
    assert ours["result"] == reference["result"]
    return ours["result"]


@pytest.mark.reference
def test_stream_config_reaches_the_registered_class(probed):
    assert _same_on_both(probed, "stream_config") == ["Configured", "seen", 60]


@pytest.mark.reference
def test_a_stream_class_registered_with_the_decorator(probed):
    assert _same_on_both(probed, "decorator_registration") == ["Decorated", 60]


@pytest.mark.reference
def test_a_stream_class_from_the_entry_point_group(probed):
    assert _same_on_both(probed, "entry_point") == ["EntryPointStream", 60]


@pytest.mark.reference
def test_the_stream_hooks_upstreams_dataset_calls_are_called(probed):
    assert _same_on_both(probed, "stream_hooks") == [["apply_default", "get_shards", "prepare_shard"], True]


@pytest.mark.reference
def test_a_get_shards_override_selects_the_shards_read(probed):
    """A Stream subclass keeping half its shards: the dataset holds and yields only those (it read all before)."""
    num_samples, ids = _same_on_both(probed, "get_shards_filter")
    assert 0 < num_samples < NUM
    assert ids == list(range(num_samples))


@pytest.mark.reference
def test_an_encoding_added_to_the_mds_table_writes_and_reads(probed):
    streamed, local, dtype, _index = _same_on_both(probed, "custom_encoding")
    assert streamed == [[i, i + 1, i + 2] for i in range(9)]
    assert (local, dtype) == ([4, 5, 6], "uint16")


@pytest.mark.reference
def test_a_shuffle_algorithm_added_to_the_table(probed):
    assert _same_on_both(probed, "custom_shuffle") == list(range(59, -1, -1))


@pytest.mark.reference
def test_streaming_dataloader_checkpoints_through_a_state_dict_override(probed):
    assert _same_on_both(probed, "state_dict_override")["sample_in_epoch"] == 24  # 3 batches of 4, doubled


def test_get_shards_override_must_return_the_hooks_own_shards(tmp_path, remote):
    """Readers built some other way carry no index entry to rebuild the table from: a clear error, not a crash."""

    class Rebuilt(Stream):
        def get_shards(self, world, allow_unsafe_types):
            shards = super().get_shards(world, allow_unsafe_types)
            for shard in shards:
                del shard.index_entry  # as a reader constructed by the subclass itself
            return shards

    with pytest.raises(TypeError, match="Rebuilt.get_shards returned shards without their index entries"):
        StreamingDataset(streams=[Rebuilt(remote=remote, local=str(tmp_path / "cache"))], batch_size=4)
