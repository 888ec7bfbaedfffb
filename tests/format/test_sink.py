"""The writer/sink contract: a sink is given at construction, and a storage failure at any point of a write
surfaces as itself, naming the file and URL, with nothing published at the destination.

The failing remote is a real one: a local directory in which a directory already occupies the name of one
file, so that the backend's rename of that file fails (as root, a read-only directory would not stop it).
"""

from __future__ import annotations

import json
import os

import pytest

from streaming import LocalDataset, MDSWriter
from streaming.compat.cloud_uploaders import CloudUploader, LocalUploader
from streaming.format import JSONWriter, XSVWriter
from streaming.format.index import INDEX_BASENAME
from streaming.format.sink import ShardSink
from streaming.storage import ShardUploader
from streaming.storage.errors import StorageError

COLUMNS = {"id": "int", "blob": "bytes"}
SAMPLES = [{"id": i, "blob": bytes([i]) * 900} for i in range(7)]  # two samples per shard: shards 0..3
SHARDS = 4
POSITIONS = {
    "first shard": "shard.00000.mds",
    "middle shard": "shard.00001.mds",
    "last shard": f"shard.{SHARDS - 1:05}.mds",
    "index": INDEX_BASENAME,
}


def _upstream_sink(out: tuple[str, str]) -> ShardSink:
    return CloudUploader.get(out, retry=1)


def _write(out: tuple[str, str], sink: ShardSink | None) -> None:
    options = {"retry": 1} if sink is None else {}
    with MDSWriter(out=out, columns=COLUMNS, size_limit=2500, sink=sink, **options) as writer:
        for sample in SAMPLES:
            writer.write(sample)


@pytest.mark.parametrize("make_sink", [None, _upstream_sink], ids=["ShardUploader", "CloudUploader"])
def test_each_sink_writes_a_readable_dataset(tmp_path, make_sink):
    out = (str(tmp_path / "local"), str(tmp_path / "remote"))
    _write(out, make_sink(out) if make_sink else None)
    with open(tmp_path / "remote" / INDEX_BASENAME) as index:
        assert len(json.load(index)["shards"]) == SHARDS
    assert [sample["id"] for sample in LocalDataset(out[1])] == [sample["id"] for sample in SAMPLES]
    assert not os.path.exists(out[0]), "without keep_local the staging copy is removed"


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("make_sink", [None, _upstream_sink], ids=["ShardUploader", "CloudUploader"])
def test_a_storage_failure_anywhere_surfaces_as_itself(tmp_path, position, make_sink):
    local, remote = str(tmp_path / "local"), str(tmp_path / "remote")
    blocked = os.path.join(remote, POSITIONS[position])
    os.makedirs(blocked)
    with pytest.raises(StorageError) as raised:
        _write((local, remote), make_sink((local, remote)) if make_sink else None)
    assert raised.value.url == blocked and blocked in str(raised.value)
    if position != "index":
        assert not os.path.exists(os.path.join(remote, INDEX_BASENAME)), "no index may name a missing shard"
    with open(os.path.join(local, INDEX_BASENAME)) as index:  # nothing written is lost: a local index is kept
        kept = [shard["raw_data"]["basename"] for shard in json.load(index)["shards"]]
    before = [f"shard.{number:05}.mds" for number in range(SHARDS)][: list(POSITIONS).index(position)]
    assert kept[: len(before)] == before, "every shard stored before the failure is indexed"
    assert all(os.path.isfile(os.path.join(local, name)) or os.path.isfile(os.path.join(remote, name)) for name in kept)


def test_every_implementation_satisfies_the_protocol(tmp_path):
    from streaming.convert.upload_sink import UploadingSink

    sinks = [
        ShardUploader(str(tmp_path / "a"), index_basename=INDEX_BASENAME),
        LocalUploader((str(tmp_path / "b"), str(tmp_path / "c"))),
        UploadingSink(str(tmp_path / "d"), str(tmp_path / "e")),
    ]
    assert all(isinstance(sink, ShardSink) for sink in sinks)
    assert not isinstance(object(), ShardSink)


@pytest.mark.parametrize(
    "writer_class, extra",
    [(MDSWriter, {}), (JSONWriter, {}), (XSVWriter, {"separator": "|"})],
)
def test_the_sink_is_a_constructor_argument_of_every_writer(tmp_path, writer_class, extra):
    out = (str(tmp_path / "local"), str(tmp_path / "remote"))
    sink = LocalUploader(out)
    writer = writer_class(out=out, columns={"text": "str"}, sink=sink, **extra)
    assert writer.sink is sink and writer.cloud_writer is sink
    with pytest.raises(AttributeError):
        writer.cloud_writer = ShardUploader(str(tmp_path / "other"), index_basename=INDEX_BASENAME)
    writer.write({"text": "hello"})
    writer.finish()
    assert LocalDataset(out[1])[0] == {"text": "hello"}


def test_a_given_sink_must_match_out_and_owns_the_upload_options(tmp_path):
    sink = LocalUploader((str(tmp_path / "local"), str(tmp_path / "remote")))
    with pytest.raises(ValueError, match="sink writes from"):
        MDSWriter(out=str(tmp_path / "elsewhere"), columns=COLUMNS, sink=sink)
    with pytest.raises(ValueError, match="retry: upload options belong to the sink"):
        MDSWriter(out=(sink.local, sink.remote), columns=COLUMNS, sink=sink, retry=3)
    with pytest.raises(TypeError, match="must implement ShardSink"):
        MDSWriter(out=str(tmp_path / "x"), columns=COLUMNS, sink=object())  # type: ignore[arg-type]


class _RefusingSink(ShardUploader):
    """A sink that refuses one stored file when it is handed over, as a sink reports an earlier upload's failure
    at the next file (which file that is depends on the threads' timing)."""

    def __init__(self, local: str, remote: str, refused: str) -> None:
        super().__init__((local, remote), index_basename=INDEX_BASENAME, retry=1)
        self.refused = refused

    def upload(self, basename: str) -> None:
        if basename == self.refused:
            raise StorageError(f"{self.remote}/{basename}", "refused")
        super().upload(basename)


def test_a_file_the_sink_refuses_after_it_was_stored_stays_in_the_local_index(tmp_path):
    local, remote = str(tmp_path / "local"), str(tmp_path / "remote")
    sink = _RefusingSink(local, remote, "shard.00001.mds")
    with pytest.raises(StorageError, match="shard.00001.mds: refused"):
        _write((local, remote), sink)
    with open(os.path.join(local, INDEX_BASENAME)) as index:
        kept = [shard["raw_data"]["basename"] for shard in json.load(index)["shards"]]
    assert kept[:2] == ["shard.00000.mds", "shard.00001.mds"], "a stored shard is indexed whatever the sink said"
    assert all(os.path.isfile(os.path.join(local, name)) or os.path.isfile(os.path.join(remote, name)) for name in kept)
    assert not os.path.exists(os.path.join(remote, INDEX_BASENAME))
